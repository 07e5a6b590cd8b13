"""Monte Carlo checks of what a random feature map estimates.

A map z estimates K(x, y) by <z(x), z(y)>. Drawing N independent maps (seeds
0..N-1) gives N independent estimates of every entry; :func:`assert_unbiased`
checks that their mean is within a band of a few standard errors of the exact
value, for every entry at once.
"""

from __future__ import annotations

import numpy as np

__all__ = ["estimates_over_seeds", "assert_unbiased"]


def estimates_over_seeds(make, X, n_seeds, *, first_seed=0):
    """Gram and squared-distance estimates of ``n_seeds`` independently seeded maps.

    Parameters
    ----------
    make : callable
        ``make(seed)`` returns an unfitted projector.
    X : ndarray of shape (n, d)
    n_seeds : int
    first_seed : int, default=0

    Returns
    -------
    grams : ndarray of shape (n_seeds, n, n)
        ``Z Z^T`` per seed.
    sq_distances : ndarray of shape (n_seeds, n, n)
        ``||z(x_i) - z(x_j)||^2`` per seed.
    """
    grams, dists = [], []
    for seed in range(first_seed, first_seed + n_seeds):
        Z = np.asarray(make(seed).fit(X).transform(X), dtype=np.float64)
        G = Z @ Z.T
        sq = np.diag(G)
        grams.append(G)
        dists.append(sq[:, None] + sq[None, :] - 2 * G)
    return np.array(grams), np.array(dists)


def assert_unbiased(samples, exact, what="estimate", *, z_band=4.5):
    """Assert the mean of ``samples`` is within ``z_band`` standard errors of ``exact``.

    Parameters
    ----------
    samples : array-like of shape (n_draws, ...)
        Independent estimates, one per draw.
    exact : array-like of shape (...)
        The values they estimate.
    what : str
        Named in the failure message.
    z_band : float, default=4.5
        Half-width of the band in standard errors. With ~200 entries tested, a correct
        estimator fails a 4.5 band with probability below 1e-3.

    Examples
    --------
    >>> import numpy as np
    >>> draws = np.random.default_rng(0).normal(1.0, 0.1, size=(400, 3))
    >>> assert_unbiased(draws, np.ones(3))
    """
    samples = np.asarray(samples, dtype=np.float64)
    exact = np.asarray(exact, dtype=np.float64)
    mean = samples.mean(axis=0)
    se = samples.std(axis=0, ddof=1) / np.sqrt(samples.shape[0])
    floor = 1e-12 * max(float(np.abs(exact).max(initial=0.0)), 1e-300)
    z = np.abs(mean - exact) / np.maximum(se, floor)
    worst = np.unravel_index(np.argmax(z), z.shape)
    assert z.max() < z_band, (
        f"{what}: entry {worst} mean {mean[worst]:.5g} vs exact {exact[worst]:.5g} "
        f"({z.max():.2f} standard errors, band {z_band})"
    )
