"""Distributions of hyperplane entries, drawn block by block from the seed contract.

Each sampler has the signature ``sampler(rng, n_rows) -> ndarray`` expected by
:func:`dkrp._random.draw_rows`; all draws are float64 master copies.
"""

from __future__ import annotations

import numpy as np

from .._choices import DISTRIBUTIONS
from .._validation import check_choice, check_real
from ..errors import InvalidInputError

__all__ = ["hyperplane_sampler", "resolve_density", "index_sampler", "DISTRIBUTIONS"]


def resolve_density(density, n_features, distribution="achlioptas"):
    """Fraction of non-zero entries of an Achlioptas matrix (``"auto"`` = 1/sqrt(d)).

    As in scikit-learn's SparseRandomProjection; Li, Hastie & Church (2006). Gaussian
    matrices are dense: 1.0, and ``density`` is not looked at.
    """
    if distribution != "achlioptas":
        return 1.0
    if isinstance(density, str):
        if density != "auto":
            raise InvalidInputError(
                f"density must be 'auto' or a float in (0, 1]; got {density!r}.")
        return 1.0 / np.sqrt(n_features)
    return check_real("density", density, minimum=0.0, maximum=1.0, include_min=False)


def hyperplane_sampler(distribution, n_features, density=1.0):
    """Sampler of ``(n, n_features)`` rows with i.i.d. zero-mean, unit-variance entries.

    ``"gaussian"``: N(0, 1). ``"achlioptas"``: sqrt(s)·{+1, 0, −1} with probabilities
    1/(2s), 1 − 1/s, 1/(2s) where s = 1/density (Achlioptas 2001, eq. (3) of
    López-Sánchez et al. 2018).
    """
    check_choice("distribution", distribution, DISTRIBUTIONS)
    if distribution == "gaussian":

        def sample(rng, n):
            return rng.standard_normal((n, n_features))

        return sample

    scale = np.sqrt(1.0 / density)

    def sample_sparse(rng, n):
        u = rng.random((n, n_features))
        out = np.zeros((n, n_features))
        out[u < density / 2] = scale
        out[(u >= density / 2) & (u < density)] = -scale
        return out

    return sample_sparse


def index_sampler(pool_size, n_indices):
    """Sampler of rows of ``n_indices`` distinct indices drawn from ``range(pool_size)``.

    Each row is the first ``n_indices`` entries of an independent uniform
    permutation, i.e. a uniformly random ordered subset without replacement.
    """

    def sample(rng, n):
        base = np.broadcast_to(np.arange(pool_size, dtype=np.int64), (n, pool_size))
        perm = rng.permuted(base, axis=1)
        return np.ascontiguousarray(perm[:, :n_indices])

    return sample
