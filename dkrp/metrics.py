r"""How well a feature map preserves a kernel: pure functions of (X, Z, kernel).

* :func:`distance_distortion` — eqs. (18)–(19) of López-Sánchez et al. (2018):
  the relative error of squared feature-space distances, averaged over all
  distinct pairs.
* :func:`kernel_approximation_error` — errors of :math:`Z Z^T` against the Gram
  matrix :math:`K`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InvalidInputError
from .kernels import kernel_diagonal, kernel_matrix

__all__ = [
    "DistortionResult",
    "KernelApproximationResult",
    "distance_distortion",
    "kernel_approximation_error",
]


@dataclass(frozen=True)
class DistortionResult:
    """Mean distance distortion over pairs, with its spread and what was skipped.

    ``float(result)`` is the mean (the number the paper's tables report).
    """

    mean: float
    std: float
    median: float
    max: float
    n_pairs: int
    n_skipped_pairs: int

    def __float__(self):
        return float(self.mean)


@dataclass(frozen=True)
class KernelApproximationResult:
    """Errors of ``Z Z^T`` against the exact Gram matrix ``K``."""

    mse: float
    relative_frobenius: float
    max_abs: float


def _as_dense64(Z):
    if hasattr(Z, "toarray"):
        return Z.toarray().astype(np.float64)
    return np.asarray(Z, dtype=np.float64)


def distance_distortion(X, Z, kernel="homogeneous_polynomial", *, zero_tol=1e-12, **params):
    r"""Mean relative distortion of squared distances, eqs. (18)–(19) of [1]_.

    .. math:: \mathrm{dist}_{x,y} = \frac{\left|\|z(x)-z(y)\|^2 - \|\phi(x)-\phi(y)\|^2\right|}
              {\|\phi(x)-\phi(y)\|^2},
              \qquad \|\phi(x)-\phi(y)\|^2 = K(x,x) + K(y,y) - 2K(x,y),

    averaged over all :math:`\binom{n}{2}` distinct pairs.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Input rows.
    Z : array-like of shape (n, k)
        Their features.
    kernel : str, default="homogeneous_polynomial"
        A kernel name of :mod:`dkrp.kernels`.
    zero_tol : float, default=1e-12
        Pairs with :math:`\|\phi(x)-\phi(y)\|^2 \le` ``zero_tol`` times the largest
        such distance (duplicates) are skipped and counted in ``n_skipped_pairs``.
    **params
        Kernel parameters (``degree``, ``gamma``, ``coef0``).

    Returns
    -------
    DistortionResult

    References
    ----------
    .. [1] López-Sánchez, González Arrieta, Corchado, Pattern Recognition 82 (2018).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((6, 3))
    >>> Z = np.einsum("ni,nj->nij", X, X).reshape(6, -1)  # the exact φ(x) for g = 2
    >>> float(distance_distortion(X, Z, degree=2)) < 1e-12
    True
    """
    Z = _as_dense64(Z)
    n = Z.shape[0]
    if X.shape[0] != n:
        raise InvalidInputError(f"X and Z must have the same number of rows. {X.shape[0]} != {n}")
    if n < 2:
        raise InvalidInputError(f"distance_distortion needs at least 2 rows, got {n}.")
    K = kernel_matrix(X, kernel=kernel, **params)
    diag = kernel_diagonal(X, kernel=kernel, **params)
    target = diag[:, None] + diag[None, :] - 2.0 * K
    zsq = np.einsum("ij,ij->i", Z, Z)
    approx = zsq[:, None] + zsq[None, :] - 2.0 * (Z @ Z.T)
    iu = np.triu_indices(n, k=1)
    target, approx = target[iu], approx[iu]
    keep = target > zero_tol * max(float(target.max(initial=0.0)), np.finfo(float).tiny)
    ratios = np.abs(approx[keep] - target[keep]) / target[keep]
    if ratios.size == 0:
        raise InvalidInputError(
            "Every pair of rows is at zero kernel distance; distortion is undefined."
        )
    return DistortionResult(
        mean=float(ratios.mean()),
        std=float(ratios.std()),
        median=float(np.median(ratios)),
        max=float(ratios.max()),
        n_pairs=int(ratios.size),
        n_skipped_pairs=int((~keep).sum()),
    )


def kernel_approximation_error(X, Z, kernel="homogeneous_polynomial", **params):
    r"""Mean squared, relative Frobenius and max errors of :math:`Z Z^T` against :math:`K`.

    Parameters
    ----------
    X : array-like of shape (n, d)
    Z : array-like of shape (n, k)
    kernel : str
    **params
        Kernel parameters.

    Returns
    -------
    KernelApproximationResult
        ``mse`` = mean of :math:`(ZZ^T - K)^2`, ``relative_frobenius`` =
        :math:`\|ZZ^T - K\|_F / \|K\|_F`, ``max_abs`` = largest absolute error.
    """
    Z = _as_dense64(Z)
    if X.shape[0] != Z.shape[0]:
        raise InvalidInputError(
            f"X and Z must have the same number of rows. {X.shape[0]} != {Z.shape[0]}"
        )
    K = kernel_matrix(X, kernel=kernel, **params)
    err = Z @ Z.T - K
    return KernelApproximationResult(
        mse=float(np.mean(err**2)),
        relative_frobenius=float(np.linalg.norm(err) / np.linalg.norm(K)),
        max_abs=float(np.abs(err).max()),
    )
