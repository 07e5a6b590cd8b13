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
blocks in parallel. Rows are transformed in tiles of :data:`TILE`, held transposed
(``D × TILE``, in L2 cache for all three transforms of a block), so every butterfly
is a SIMD add/subtract across the tile's rows, and three stages are fused per sweep
(radix 8). The butterflies are those of the one-row transform :func:`_fwht_inplace`
(kept as the reference), so the results are bit-identical to it
(``tests/test_pools.py``); about 3× faster at d = 784 → D = 1024 in float32
(``benchmarks/bench_pools.py --fwht``).
"""

from __future__ import annotations

import numpy as np

from .._jit import numba

__all__ = ["fwht", "sorf_project", "TILE"]


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


#: Rows transformed together: the tile is held transposed, ``(D, TILE)``, so every
#: butterfly is a contiguous, SIMD-vectorised add/subtract across the tile's rows.
TILE = 32


@numba.njit(cache=True, nogil=True, boundscheck=False, inline="always")
def _fwht_tile(buf, signs):  # noqa: C901 - see _gather_products
    """:func:`_fwht_inplace` on every column of ``signs[:, None] * buf`` (D × TILE).

    The ±1 ``signs`` are applied in the first sweep (a product by ±1 is exact: the
    same bits as a separate pass).

    Stages ``h, 2h, 4h`` are fused (radix 8: eight rows of the tile stay in registers
    for three stages), so the tile is swept ``ceil(log2(D) / 3)`` times instead of
    ``log2(D)``. Every output of every stage is still the one ``x + y`` or ``x - y``
    of :func:`_fwht_inplace`, so the results are bit-identical to it.
    """
    n = buf.shape[0]
    if n < 8:  # pragma: no cover - D >= 8 in practice; tiny D: signs, then radix 2/4
        for j in range(n):
            for r in range(TILE):
                buf[j, r] *= signs[j]
    h = 1
    while 8 * h <= n:
        for i in range(0, n, 8 * h):
            for j in range(i, i + h):
                b0 = buf[j]
                b1 = buf[j + h]
                b2 = buf[j + 2 * h]
                b3 = buf[j + 3 * h]
                b4 = buf[j + 4 * h]
                b5 = buf[j + 5 * h]
                b6 = buf[j + 6 * h]
                b7 = buf[j + 7 * h]
                one = buf.dtype.type(1)
                s0 = signs[j] if h == 1 else one
                s1 = signs[j + h] if h == 1 else one
                s2 = signs[j + 2 * h] if h == 1 else one
                s3 = signs[j + 3 * h] if h == 1 else one
                s4 = signs[j + 4 * h] if h == 1 else one
                s5 = signs[j + 5 * h] if h == 1 else one
                s6 = signs[j + 6 * h] if h == 1 else one
                s7 = signs[j + 7 * h] if h == 1 else one
                for r in range(TILE):
                    # stage h: pairs (0,1) (2,3) (4,5) (6,7)
                    x0 = b0[r] * s0
                    x1 = b1[r] * s1
                    x2 = b2[r] * s2
                    x3 = b3[r] * s3
                    x4 = b4[r] * s4
                    x5 = b5[r] * s5
                    x6 = b6[r] * s6
                    x7 = b7[r] * s7
                    a0 = x0 + x1
                    a1 = x0 - x1
                    a2 = x2 + x3
                    a3 = x2 - x3
                    a4 = x4 + x5
                    a5 = x4 - x5
                    a6 = x6 + x7
                    a7 = x6 - x7
                    # stage 2h: pairs (0,2) (1,3) (4,6) (5,7)
                    c0 = a0 + a2
                    c2 = a0 - a2
                    c1 = a1 + a3
                    c3 = a1 - a3
                    c4 = a4 + a6
                    c6 = a4 - a6
                    c5 = a5 + a7
                    c7 = a5 - a7
                    # stage 4h: pairs (0,4) (1,5) (2,6) (3,7)
                    b0[r] = c0 + c4
                    b4[r] = c0 - c4
                    b1[r] = c1 + c5
                    b5[r] = c1 - c5
                    b2[r] = c2 + c6
                    b6[r] = c2 - c6
                    b3[r] = c3 + c7
                    b7[r] = c3 - c7
        h *= 8
    if 4 * h <= n:
        for i in range(0, n, 4 * h):
            for j in range(i, i + h):
                b0 = buf[j]
                b1 = buf[j + h]
                b2 = buf[j + 2 * h]
                b3 = buf[j + 3 * h]
                for r in range(TILE):
                    a0 = b0[r] + b1[r]
                    a1 = b0[r] - b1[r]
                    a2 = b2[r] + b3[r]
                    a3 = b2[r] - b3[r]
                    b0[r] = a0 + a2
                    b2[r] = a0 - a2
                    b1[r] = a1 + a3
                    b3[r] = a1 - a3
        h *= 4
    if 2 * h <= n:
        for i in range(0, n, 2 * h):
            for j in range(i, i + h):
                x = buf[j]
                y = buf[j + h]
                for r in range(TILE):
                    u = x[r]
                    v = y[r]
                    x[r] = u + v
                    y[r] = u - v


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _sorf_project_tiled(X, signs, n_out, scale, out, out_row0):
    """:func:`_sorf_project` on tiles of ``TILE`` rows (bit-identical: the same operations)."""
    n_rows, d = X.shape
    n_blocks = signs.shape[0]
    D = signs.shape[2]
    buf = np.empty((D, TILE), dtype=out.dtype)
    ones = np.ones(D, dtype=signs.dtype)
    for tile0 in range(0, n_rows, TILE):
        nt = min(TILE, n_rows - tile0)
        for blk in range(n_blocks):
            c0 = blk * D
            m = min(D, n_out - c0)
            if m <= 0:
                break
            s1 = signs[blk, 0]
            s2 = signs[blk, 1]
            s3 = signs[blk, 2]
            if nt < TILE:  # a last, short tile: keep the unused lanes finite
                buf[:, :] = 0.0
            else:
                buf[d:, :] = 0.0
            for r in range(nt):  # contiguous reads of X, strided writes into the tile
                xr = X[tile0 + r]
                for j in range(d):
                    buf[j, r] = xr[j] * s3[j]
            _fwht_tile(buf, ones)
            _fwht_tile(buf, s2)
            _fwht_tile(buf, s1)
            for r in range(nt):
                dest = out[out_row0 + tile0 + r]
                for j in range(m):
                    dest[c0 + j] = buf[j, r] * scale


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

    Raises
    ------
    ValueError
        When the kernel would read or write outside an array: the compiled loops
        run with ``boundscheck=False``, where an out-of-range row corrupts memory
        instead of raising, so every shape and offset is checked here first.
    """
    _check_sorf_arguments(X, signs, n_out, out, out_row0)
    X = np.ascontiguousarray(X, dtype=out.dtype)
    _sorf_project_tiled(X, signs, np.int64(n_out), out.dtype.type(scale), out,
                        np.int64(out_row0))
    return out


def _check_sorf_arguments(X, signs, n_out, out, out_row0):
    """Every index :func:`_sorf_project_tiled` uses lies inside its array (else ValueError)."""
    if not (isinstance(out, np.ndarray) and out.ndim == 2
            and out.dtype in (np.float32, np.float64) and out.flags.writeable):
        raise ValueError("out must be a writeable 2-D float32 or float64 ndarray, got "
                         f"{type(out).__name__} {getattr(out, 'dtype', '')} of shape "
                         f"{getattr(out, 'shape', None)}.")
    if np.ndim(X) != 2:
        raise ValueError(f"X must be 2-D, got shape {np.shape(X)}.")
    if np.ndim(signs) != 3 or np.shape(signs)[1] != 3:
        raise ValueError(f"signs must have shape (n_blocks, 3, D), got {np.shape(signs)}.")
    n_blocks, _, D = signs.shape
    n, d = np.shape(X)
    if D < 1 or D & (D - 1) or d > D:
        raise ValueError(f"signs' D = {D} must be a power of two >= n_features = {d}.")
    n_out, out_row0 = int(n_out), int(out_row0)
    if not 0 <= n_out <= min(n_blocks * D, out.shape[1]):
        raise ValueError(f"n_out = {n_out} must lie in [0, {min(n_blocks * D, out.shape[1])}]: "
                         f"{n_blocks} blocks of D = {D} signs, out has {out.shape[1]} columns.")
    if not 0 <= out_row0 <= out.shape[0] - n:
        raise ValueError(f"out_row0 = {out_row0} puts the {n} rows of X outside out's "
                         f"{out.shape[0]} rows: it must lie in [0, {out.shape[0] - n}].")
