r"""Compiled fast Walsh–Hadamard transforms (numba) for the structured hyperplane pool.

The structured pool (:mod:`dkrp.features._pools`) is a stack of SORF-style blocks
:math:`W_b = \frac{1}{D} H D_{b,1} H D_{b,2} H D_{b,3}` with :math:`H` the
unnormalised :math:`D \times D` Sylvester–Hadamard matrix (entries ±1) and
:math:`D_{b,i}` random ±1 diagonals (Yu et al., "Orthogonal Random Features",
NIPS 2016). Its rows have unit second moments on the input coordinates, and a
full block is a tight frame: :math:`W_b^T W_b = D\,I`.

This module applies the blocks to rows of ``X`` (zero-padded to :math:`D`) in
:math:`O(D \log D)` per row and block. Every intermediate value of
:math:`H D H D H D\,e_j` is an integer below :math:`D^3 \le 2^{53}` for
:math:`D \le 2^{17}`, so materialising the pool from unit vectors is *exact*
float64 arithmetic: the materialised pool is bit-identical on every machine,
whatever the BLAS, and needs no LAPACK.

The loops are serial and release the GIL; :mod:`dkrp._threading` runs them on row
blocks in parallel. One row's length-:math:`D` buffer stays in L1/L2 cache for
all three transforms of a block (the "blocking for cache": a row block of ``X``
is streamed once per Hadamard block).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["fwht", "sorf_project"]


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _fwht_inplace(a):
    """Unnormalised in-place Walsh–Hadamard transform of a power-of-two vector."""
    n = a.shape[0]
    # First two stages fused as radix-4 butterflies on contiguous quadruples:
    # stages with h = 1, 2 have inner loops too short to vectorise.
    if n >= 4:
        for i in range(0, n, 4):
            a0 = a[i]
            a1 = a[i + 1]
            a2 = a[i + 2]
            a3 = a[i + 3]
            s01 = a0 + a1
            d01 = a0 - a1
            s23 = a2 + a3
            d23 = a2 - a3
            a[i] = s01 + s23
            a[i + 1] = d01 + d23
            a[i + 2] = s01 - s23
            a[i + 3] = d01 - d23
        h = 4
    else:
        h = 1
    while h < n:
        for i in range(0, n, 2 * h):
            for j in range(i, i + h):
                x = a[j]
                y = a[j + h]
                a[j] = x + y
                a[j + h] = x - y
        h *= 2


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _sorf_project(X, signs, n_out, scale, out, out_row0):
    n_rows, d = X.shape
    n_blocks = signs.shape[0]
    D = signs.shape[2]
    buf = np.empty(D, dtype=out.dtype)
    for r in range(n_rows):
        dest = out[out_row0 + r]
        for blk in range(n_blocks):
            c0 = blk * D
            m = min(D, n_out - c0)
            if m <= 0:
                break
            s1 = signs[blk, 0]
            s2 = signs[blk, 1]
            s3 = signs[blk, 2]
            for j in range(d):
                buf[j] = X[r, j] * s3[j]
            for j in range(d, D):
                buf[j] = 0.0
            _fwht_inplace(buf)
            for j in range(D):
                buf[j] *= s2[j]
            _fwht_inplace(buf)
            for j in range(D):
                buf[j] *= s1[j]
            _fwht_inplace(buf)
            for j in range(m):
                dest[c0 + j] = buf[j] * scale


def fwht(a):
    """Unnormalised Walsh–Hadamard transform of a 1-D power-of-two array (a copy).

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.linalg import hadamard
    >>> x = np.arange(8.0)
    >>> bool(np.array_equal(fwht(x), hadamard(8) @ x))
    True
    """
    a = np.array(a, dtype=np.float64 if np.asarray(a).dtype != np.float32 else np.float32)
    n = a.shape[0]
    if n & (n - 1) or n == 0:
        raise ValueError(f"fwht needs a power-of-two length, got {n}.")
    _fwht_inplace(a)
    return a


def sorf_project(X, signs, n_out, scale, out, out_row0=0):
    r"""Fill ``out[out_row0:out_row0+n, :n_out]`` with the structured-pool projections.

    ``out[r, b*D + i] = scale * (H D_{b,1} H D_{b,2} H D_{b,3} x_r)_i`` with
    ``x_r`` zero-padded to ``D`` (the first ``n_out`` rows of the stacked blocks).

    Parameters
    ----------
    X : ndarray of shape (n, d), C-contiguous, float32 or float64
    signs : ndarray of shape (n_blocks, 3, D), same dtype as ``out``, entries ±1
        ``signs[b, 0]``, ``signs[b, 1]``, ``signs[b, 2]`` are :math:`D_{b,1}`,
        :math:`D_{b,2}`, :math:`D_{b,3}` (:math:`D_{b,3}` is applied first).
    n_out : int
        Number of pool rows, at most ``n_blocks * D``.
    scale : float
        ``1 / D`` for the KRP pool (unit second moments); times
        :math:`\sqrt{2\gamma}` for Gaussian random Fourier features.
    out : ndarray of shape (N, n_out), C-contiguous
    out_row0 : int
    """
    X = np.ascontiguousarray(X, dtype=out.dtype)
    _sorf_project(X, signs, np.int64(n_out), out.dtype.type(scale), out, np.int64(out_row0))
    return out
