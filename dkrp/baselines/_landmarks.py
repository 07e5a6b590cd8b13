"""Landmark sampling and kernel plumbing shared by the data-dependent baselines.

Nyström and KG-RP both learn from a uniform sample of training rows (landmarks).
This module owns

* :func:`sample_landmark_indices` — the sampled row indices, a function of
  ``(seed, n_samples, n_landmarks)`` only (stream ``"landmarks"``), so the same seed
  picks the same rows from a numpy array and from a dask array however it is
  chunked;
* :func:`take_landmarks` — the rows themselves: fancy indexing for in-memory
  input, one pass over the blocks that hold them (``X[sorted_idx].compute()``) for
  dask input, followed by the usual NaN/inf check naming the *global* row;
* :func:`resolve_kernel_params` — the kernel parameters a method passes to
  :func:`dkrp.kernels.kernel_matrix` (only those its kernel takes);
* :func:`inverse_sqrt_psd` — :math:`A^{-1/2}` of a symmetric PSD matrix by ``eigh``.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array

from .._random import block_generator
from .._validation import (
    check_choice,
    check_finite_rows,
    first_nonfinite_row,
    sklearn_checks,
)
from ..errors import InvalidInputError
from ..kernels import KERNEL_PARAMS, check_kernel_params

logger = logging.getLogger(__name__)

__all__ = [
    "sample_landmark_indices",
    "take_landmarks",
    "resolve_kernel_params",
    "inverse_sqrt_psd",
]

FLOAT_DTYPES = (np.float64, np.float32)


def sample_landmark_indices(seed, n_samples, n_landmarks, *, what="landmarks"):
    """Sorted row indices of ``n_landmarks`` rows drawn uniformly without replacement.

    Parameters
    ----------
    seed : int
        The projector's seed.
    n_samples : int
        Number of training rows.
    n_landmarks : int
        Number of rows to draw.
    what : str
        Parameter name used in the error message.

    Returns
    -------
    indices : ndarray of int64, shape (n_landmarks,), sorted

    Raises
    ------
    ValueError
        If ``n_samples < n_landmarks``.

    Notes
    -----
    The generator is ``block_generator(seed, "landmarks", 0)``; the draw depends on
    nothing but ``(seed, n_samples, n_landmarks)``, never on chunks or workers.

    Examples
    --------
    >>> a = sample_landmark_indices(0, 100, 5)
    >>> bool((a == sample_landmark_indices(0, 100, 5)).all()), bool((a[1:] > a[:-1]).all())
    (True, True)
    """
    n_samples, n_landmarks = int(n_samples), int(n_landmarks)
    if n_samples < n_landmarks:
        raise InvalidInputError(
            f"Cannot sample {what}={n_landmarks} landmark rows without replacement from "
            f"n_samples={n_samples} training rows; lower {what} or give more rows."
        )
    rng = block_generator(seed, "landmarks", 0)
    idx = rng.choice(n_samples, size=n_landmarks, replace=False, shuffle=False)
    return np.sort(idx.astype(np.int64))


def take_landmarks(X, indices):
    """Rows ``X[indices]`` as a float64 dense ndarray, validated.

    For a dask array the rows are gathered in one pass over only the blocks that
    hold them; they are then checked for NaN/inf and the message names the global
    row of the training set.
    """
    from .._validation import is_dask_collection

    if is_dask_collection(X):
        logger.info("sampling %d landmark rows from a dask array (one pass)", len(indices))
        rows = X[indices].compute()
        with sklearn_checks():
            rows = check_array(rows, accept_sparse="csr", dtype=FLOAT_DTYPES,
                               ensure_all_finite=False, ensure_min_samples=0)
        try:
            check_finite_rows(rows)
        except ValueError as exc:
            local, _ = first_nonfinite_row(rows)
            raise InvalidInputError(f"{exc} The offending landmark is training row "
                                    f"{int(indices[local])}.") from exc
    else:
        rows = X[indices]
    if sp.issparse(rows):
        rows = rows.toarray()  # landmarks are few; kernels against them stay sparse-aware
    return np.array(rows, dtype=np.float64, order="C")


def resolve_kernel_params(kernel, degree, gamma, coef0, n_features, *,
                          supported=tuple(KERNEL_PARAMS)):
    """The parameters ``kernel`` takes, resolved (``None`` → the kernel's default).

    Parameters the kernel does not take are ignored (as in scikit-learn's Nystroem);
    a kernel outside ``supported`` is a ValueError. Defaults come from
    :data:`dkrp.kernels.KERNEL_PARAMS` (``gamma=None`` → ``1/n_features``).
    """
    check_choice("kernel", kernel, supported)
    given = {"degree": degree, "gamma": gamma, "coef0": coef0}
    return check_kernel_params(kernel, n_features, **{
        k: given[k] for k in KERNEL_PARAMS[kernel] if given[k] is not None})


def inverse_sqrt_psd(A, *, mode="pinv", rtol=None):
    r""":math:`A^{-1/2}` of a symmetric matrix by ``numpy.linalg.eigh``.

    Parameters
    ----------
    A : ndarray of shape (m, m), symmetric
    mode : {"sklearn", "pinv"}
        ``"sklearn"``: exactly scikit-learn's Nystroem normalisation,
        :math:`U \operatorname{diag}(\max(\sigma, 10^{-12}))^{-1/2} V^T` from the SVD,
        written with eigenpairs as :math:`\sum_i \operatorname{sign}(\lambda_i)
        \max(|\lambda_i|, 10^{-12})^{-1/2} v_i v_i^T`.
        ``"pinv"``: the pseudo-inverse square root; eigenvalues at or below
        ``rtol * max(lambda)`` (default ``rtol = m * eps``, numpy's ``matrix_rank``
        rule) are treated as zero and their directions get weight 0.
    rtol : float, optional

    Returns
    -------
    ndarray of shape (m, m), symmetric, finite
    """
    lam, V = np.linalg.eigh(A)
    if mode == "sklearn":
        sign = np.where(lam < 0, -1.0, 1.0)
        inv = sign / np.sqrt(np.maximum(np.abs(lam), 1e-12))
    else:
        if rtol is None:
            rtol = A.shape[0] * np.finfo(np.float64).eps
        top = float(lam.max(initial=0.0))
        keep = lam > rtol * top if top > 0 else np.zeros(lam.shape, dtype=bool)
        inv = np.zeros_like(lam)
        inv[keep] = 1.0 / np.sqrt(lam[keep])
    out = (V * inv) @ V.T
    return (out + out.T) / 2.0  # exact symmetry, independent of rounding in the product
