r"""Exact kernels, named the same way everywhere in dkrp.

============================  ============================================  =====================
name                          :math:`K(x, y)`                               parameters
============================  ============================================  =====================
``"homogeneous_polynomial"``  :math:`\langle x, y\rangle^g`                 ``degree``
``"polynomial"``              :math:`(\gamma\langle x, y\rangle + c_0)^g`   degree, gamma, coef0
``"gaussian"``                :math:`\exp(-\gamma\|x - y\|_2^2)`            ``gamma``
``"laplacian"``               :math:`\exp(-\gamma\|x - y\|_1)`              ``gamma``
============================  ============================================  =====================

Gram matrices are computed in row blocks so large inputs need bounded memory.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import pairwise

from ._validation import check_choice, check_integer, check_real
from .errors import InvalidInputError

__all__ = [
    "KERNELS",
    "KERNEL_PARAMS",
    "SKLEARN_ALIASES",
    "PSD_KERNELS",
    "SHIFT_INVARIANT_KERNELS",
    "kernel_matrix",
    "kernel_diagonal",
    "check_kernel_params",
    "scale_gamma",
]

#: The one kernel-parameter table: each kernel's parameters and their defaults
#: (``gamma=None`` is ``1 / n_features``, scikit-learn's default). dkrp's own names
#: first, then scikit-learn's ``pairwise_kernels`` names so that code written for
#: ``sklearn.kernel_approximation.Nystroem`` runs unchanged: ``"rbf"`` is the same
#: kernel as ``"gaussian"``, ``"poly"`` as ``"polynomial"`` (with scikit-learn's
#: default degree 3), ``"laplacian"`` is the same in both.
KERNEL_PARAMS = {
    "homogeneous_polynomial": {"degree": 2},
    "polynomial": {"degree": 2, "gamma": None, "coef0": 1.0},
    "gaussian": {"gamma": None},
    "laplacian": {"gamma": None},
    "rbf": {"gamma": None},
    "poly": {"degree": 3, "gamma": None, "coef0": 1.0},
    "linear": {},
    "cosine": {},
    "sigmoid": {"gamma": None, "coef0": 1.0},
    "chi2": {"gamma": 1.0},
    "additive_chi2": {},
}
#: dkrp's kernel names (the ones its random feature maps approximate).
KERNELS = ("homogeneous_polynomial", "polynomial", "gaussian", "laplacian")
#: scikit-learn's names that are the same mathematics as a dkrp kernel.
SKLEARN_ALIASES = {"rbf": "gaussian", "poly": "polynomial"}
#: The positive semi-definite ones (scikit-learn's sigmoid kernel is not).
PSD_KERNELS = tuple(k for k in KERNEL_PARAMS if k != "sigmoid")
#: Kernels of x - y alone, the ones random Fourier features approximate.
SHIFT_INVARIANT_KERNELS = ("gaussian", "laplacian")
_DEFAULTS = KERNEL_PARAMS


def scale_gamma(X, kernel="gaussian") -> float:
    r"""``gamma="scale"``: scikit-learn's SVC width, from the data.

    :math:`1 / (d \cdot \mathrm{Var}(X))` for the Gaussian kernel and
    :math:`1 / (d \cdot \mathrm{Std}(X))` for the Laplacian (its distances scale
    linearly), the variance taken over all entries of ``X``; 1.0 for constant ``X``.

    Parameters
    ----------
    X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
        A dask array is read in one pass (mean and mean of squares).
    kernel : {"gaussian", "laplacian"}, default="gaussian"

    Returns
    -------
    gamma : float

    Examples
    --------
    >>> X = np.array([[0.0, 2.0], [2.0, 0.0]])
    >>> scale_gamma(X), scale_gamma(X, "laplacian")
    (0.5, 0.5)
    """
    check_choice("kernel", kernel, SHIFT_INVARIANT_KERNELS)
    n_features = int(X.shape[1])
    if hasattr(X, "__dask_graph__"):
        import dask

        Xf = X.astype(np.float64)
        if sp.issparse(getattr(X, "_meta", None)):
            sq = Xf.map_blocks(lambda b: b.multiply(b), dtype=np.float64)
        else:
            sq = Xf * Xf
        mean, mean_sq = (float(np.asarray(v)) for v in dask.compute(Xf.mean(), sq.mean()))
        if not (np.isfinite(mean) and np.isfinite(mean_sq)):
            raise InvalidInputError(
                "Input X contains NaN or infinity: cannot compute gamma='scale'."
            )
        var = mean_sq - mean**2
    elif sp.issparse(X):
        mean = float(np.asarray(X.mean()))
        var = float(np.asarray(X.multiply(X).mean())) - mean**2
    else:
        var = float(np.var(X))
    spread = var if kernel == "gaussian" else float(np.sqrt(max(var, 0.0)))
    return 1.0 / (n_features * spread) if spread > 0 else 1.0


def _as_float64(X):
    return X.astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def check_kernel_params(kernel, n_features=None, **params):
    """Validate a kernel name and its parameters; return the resolved parameters.

    ``gamma=None`` means ``1 / n_features`` (scikit-learn's default). Unknown
    parameters are refused rather than ignored.
    """
    check_choice("kernel", kernel, tuple(KERNEL_PARAMS))
    allowed = KERNEL_PARAMS[kernel]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise InvalidInputError(
            f"Kernel {kernel!r} takes parameters {sorted(allowed)}; got unexpected {unknown}."
        )
    resolved = {**allowed, **{k: v for k, v in params.items()}}
    if "degree" in resolved:
        check_integer("degree", resolved["degree"], minimum=1)
    if "gamma" in resolved:
        if resolved["gamma"] is None:
            if n_features is None:
                raise InvalidInputError(f"gamma is required for kernel {kernel!r}.")
            resolved["gamma"] = 1.0 / n_features
        check_real("gamma", resolved["gamma"], minimum=0.0, include_min=False)
    if "coef0" in resolved:
        check_real("coef0", resolved["coef0"])
    return resolved


def _block(X, Y, kernel, p):
    if kernel == "homogeneous_polynomial":
        G = X @ Y.T
        G = G.toarray() if sp.issparse(G) else np.asarray(G)
        return G ** p["degree"]
    kernel = SKLEARN_ALIASES.get(kernel, kernel)
    if kernel == "polynomial":
        return pairwise.polynomial_kernel(X, Y, degree=p["degree"], gamma=p["gamma"],
                                          coef0=p["coef0"])
    if kernel == "gaussian":
        return pairwise.rbf_kernel(X, Y, gamma=p["gamma"])
    return pairwise.pairwise_kernels(X, Y, metric=kernel, **p)


def kernel_matrix(X, Y=None, *, kernel="homogeneous_polynomial", block_size=2048, **params):
    """Exact Gram matrix ``K[i, j] = K(X[i], Y[j])`` in float64.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n, d)
    Y : array-like or sparse matrix of shape (m, d), default=None (``Y = X``)
    kernel : str
        A name of :data:`KERNEL_PARAMS`: dkrp's, or scikit-learn's ``pairwise_kernels``
        names (``"rbf"``, ``"poly"``, ``"linear"``, ``"cosine"``, ``"sigmoid"``,
        ``"chi2"``, ``"additive_chi2"``).
    block_size : int
        Rows of ``X`` per block.
    **params
        ``degree``, ``gamma``, ``coef0`` as the kernel takes them.

    Returns
    -------
    K : ndarray of shape (n, m)

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 2.0], [0.0, 1.0]])
    >>> kernel_matrix(X, kernel="homogeneous_polynomial", degree=2)
    array([[25.,  4.],
           [ 4.,  1.]])
    """
    X = _as_float64(X)
    Y = X if Y is None else _as_float64(Y)
    if X.shape[1] != Y.shape[1]:
        raise InvalidInputError(
            f"X and Y must have the same number of features. {X.shape[1]} != {Y.shape[1]}"
        )
    p = check_kernel_params(kernel, X.shape[1], **params)
    out = np.empty((X.shape[0], Y.shape[0]))
    for start in range(0, X.shape[0], block_size):
        out[start : start + block_size] = _block(X[start : start + block_size], Y, kernel, p)
    return out


def kernel_diagonal(X, *, kernel="homogeneous_polynomial", **params):
    """``K(x_i, x_i)`` for every row, without forming the Gram matrix."""
    X = X.astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    p = check_kernel_params(kernel, X.shape[1], **params)
    kernel = SKLEARN_ALIASES.get(kernel, kernel)
    if kernel in ("gaussian", "laplacian"):
        return np.ones(X.shape[0])
    if kernel not in KERNELS:
        return np.array([_block(X[i : i + 1], X[i : i + 1], kernel, p)[0, 0]
                         for i in range(X.shape[0])])
    if sp.issparse(X):
        sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    else:
        sq = np.einsum("ij,ij->i", X, X)
    if kernel == "homogeneous_polynomial":
        return sq ** p["degree"]
    return (p["gamma"] * sq + p["coef0"]) ** p["degree"]
