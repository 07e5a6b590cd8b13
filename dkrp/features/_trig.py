r"""Compiled, branch-free cosine and sine (numba), fused with the random Fourier map.

``np.cos`` on float64 calls the C library's scalar ``cos`` (≈ 20 ns per value on
the machines dkrp was measured on), which made random Fourier features cost far
more than their GEMM. This module evaluates :math:`\cos` and :math:`\sin` with
plain IEEE additions and multiplications in loops LLVM vectorises:

1. **Reduction.** :math:`k = \mathrm{rint}(x \cdot 2/\pi)` (by the
   :math:`1.5 \cdot 2^{52}` rounding trick) and :math:`r = x - k\pi/2` by
   Cody–Waite in three parts: :math:`\pi/2 = P_1 + P_2 + P_3 + P_{3t}` with
   :math:`P_1, P_2, P_3` of 33 significant bits (fdlibm's ``pio2_1``,
   ``pio2_2``, ``pio2_3``), so :math:`kP_i` is exact for :math:`|k| < 2^{20}`;
   the two subtractions after the first are error-free (TwoSum) and :math:`r` is
   kept as a double-double :math:`(r_{hi}, r_{lo})`, good to well beyond 53 bits
   even next to a multiple of :math:`\pi/2`.
2. **Polynomials.** fdlibm's minimax kernels ``__kernel_sin`` /
   ``__kernel_cos`` on :math:`[-\pi/4, \pi/4]` (error below :math:`2^{-58}`),
   with the :math:`r_{lo}` correction.
3. **Quadrant.** :math:`k \bmod 4` picks :math:`\pm\sin r` or :math:`\pm\cos r`
   by selects and a multiplication by ±1 (no branch), so the loop vectorises.

**Exact range.** The reduction is exact (up to the double-double's 100+ bits)
for :math:`|x| \le` :data:`REDUCTION_LIMIT` :math:`= 2^{20}`. The kernels count
the arguments outside it (and NaN); :func:`cos_features_block` and
:func:`cos_sin_features_block` recompute those few with ``np.cos`` / ``np.sin``.
Random Fourier arguments are :math:`w^T x + b` with :math:`w \sim N(0, 2\gamma I)`:
beyond :math:`2^{20}` the features are noise whatever the cosine.

**Accuracy.** Within 1 ulp of the exact value (so within 2 ulp of ``np.cos``);
measured in ``tests/test_trig.py``.

**Determinism.** Only ``+ - *`` in round-to-nearest, no fused multiply-add (numba
compiles without ``fastmath``, so LLVM does not contract), no library call: the
same bits on every x86-64 or ARM machine, whatever its libm and vector width.

**float32, two versions.** Version 1 (``cosine_ = "dkrp"``) evaluates a float32
argument in float64 and rounds once, with a two-part reduction and no tail terms (a
float32 argument has 24 bits: ``(x - k P1) - k (pi/2 - P1)`` is accurate far below
float32's ulp). Version 2 (``"dkrp2"``, every new fit) keeps that float64 reduction
but evaluates the polynomials in float32 arithmetic, with fdlibm's float kernels
``__kernel_sindf`` / ``__kernel_cosdf`` (four terms each, error below
:math:`2^{-34}`): eight float32 lanes per AVX2 vector instead of four float64 ones.
Both are within 1 ulp of the exact value, but their bits differ in the last place,
so a spec keeps the version it was fitted with. The out-of-range test of version 2
is an OR of flags (no 64-bit counter), which lets LLVM pick the float32 vector width.

The loops are serial and release the GIL; :mod:`dkrp._threading` runs them on row
blocks in parallel, right after each block's GEMM (as :mod:`._gather`).
"""

from __future__ import annotations

import numpy as np

from .._jit import numba
from ..errors import InvalidInputError

__all__ = [
    "REDUCTION_LIMIT",
    "VERSIONS",
    "cos",
    "sin",
    "cos_features_block",
    "cos_features_inplace",
    "cos_sin_features_block",
]

#: Largest ``|x|`` the compiled reduction handles exactly; beyond it, numpy's.
REDUCTION_LIMIT = 2.0**20
#: Kernel versions: 1 evaluates float32 in float64, 2 in float32 (float64 is the same).
VERSIONS = (1, 2)

_TOINT = 1.5 * 2.0**52
_INVPIO2 = 6.36619772367581382433e-01
_PIO2_1 = 1.57079632673412561417e00  # first 33 bits of pi/2
_PIO2_1T = 6.07710050650619224932e-11  # pi/2 - pio2_1 (float32 arguments)
_PIO2_2 = 6.07710050630396597660e-11  # second 33 bits
_PIO2_3 = 2.02226624871116645580e-21  # third 33 bits
_PIO2_3T = 8.47842766036889956997e-32  # pi/2 - (pio2_1 + pio2_2 + pio2_3)

_S1 = -1.66666666666666324348e-01
_S2 = 8.33333333332248946124e-03
_S3 = -1.98412698298579493134e-04
_S4 = 2.75573137070700676789e-06
_S5 = -2.50507602534068634195e-08
_S6 = 1.58969099521155010221e-10

_C1 = 4.16666666666666019037e-02
_C2 = -1.38888888888741095749e-03
_C3 = 2.48015872894767294178e-05
_C4 = -2.75573143513906633035e-07
_C5 = 2.08757232129817482790e-09
_C6 = -1.13596475577881948265e-11

# fdlibm's __kernel_sindf / __kernel_cosdf (musl k_sinf.c, k_cosf.c), rounded to float32
_FS1 = np.float32(-0.166666666416265235595)
_FS2 = np.float32(0.0083333293858894631756)
_FS3 = np.float32(-0.000198393348360966317347)
_FS4 = np.float32(0.0000027183114939898219064)
_FC0 = np.float32(-0.499999997251031003120)
_FC1 = np.float32(0.0416666233237390631894)
_FC2 = np.float32(-0.00138867637746099294692)
_FC3 = np.float32(0.0000243904487962774090654)
_F32_LIMIT = np.float32(REDUCTION_LIMIT)
_ONE32 = np.float32(1.0)

_JIT = dict(cache=True, nogil=True, boundscheck=False, inline="always")


@numba.njit(**_JIT)
def _reduce(x):
    """``(r_hi, r_lo, q)``: ``x = (k + 4n) * pi/2 + r_hi + r_lo``, ``q = k mod 4`` as float."""
    fn = (x * _INVPIO2 + _TOINT) - _TOINT  # rint for |x| < 2**51
    t = x - fn * _PIO2_1  # exact: fn * P1 is exact and Sterbenz applies
    # t - fn*P2, error-free (TwoSum)
    w = fn * _PIO2_2
    a = t - w
    bb = a - t
    e1 = (t - (a - bb)) - (w + bb)
    # a - fn*P3, error-free (TwoSum)
    w = fn * _PIO2_3
    b = a - w
    bb = b - a
    e2 = (a - (b - bb)) - (w + bb)
    lo = (e1 + e2) - fn * _PIO2_3T
    hi = b + lo
    lo = (b - hi) + lo
    q = fn - 4.0 * np.floor(fn * 0.25)
    return hi, lo, q


@numba.njit(**_JIT)
def _ksin(x, y):
    """fdlibm ``__kernel_sin(x, y, 1)``: sin(x + y) for |x| <= pi/4, |y| tiny."""
    z = x * x
    w = z * z
    r = _S2 + z * (_S3 + z * _S4) + z * w * (_S5 + z * _S6)
    v = z * x
    return x - ((z * (0.5 * y - v * r) - y) - v * _S1)


@numba.njit(**_JIT)
def _kcos(x, y):
    """fdlibm/musl ``__cos(x, y)``: cos(x + y) for |x| <= pi/4, |y| tiny."""
    z = x * x
    w = z * z
    r = z * (_C1 + z * (_C2 + z * _C3)) + w * w * (_C4 + z * (_C5 + z * _C6))
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + (z * r - x * y))


@numba.njit(**_JIT)
def _cos_sin(x):
    """``(cos x, sin x)`` in float64, branch-free (valid for |x| <= REDUCTION_LIMIT)."""
    hi, lo, q = _reduce(x)
    s = _ksin(hi, lo)
    c = _kcos(hi, lo)
    odd = (q == 1.0) | (q == 3.0)
    cs = s if odd else c
    sn = c if odd else s
    cos_sign = -1.0 if (q == 1.0) | (q == 2.0) else 1.0
    sin_sign = -1.0 if q >= 2.0 else 1.0
    return cs * cos_sign, sn * sin_sign


@numba.njit(**_JIT)
def _cos(x):
    hi, lo, q = _reduce(x)
    s = _ksin(hi, lo)
    c = _kcos(hi, lo)
    odd = (q == 1.0) | (q == 3.0)
    cs = s if odd else c
    sign = -1.0 if (q == 1.0) | (q == 2.0) else 1.0
    return cs * sign


@numba.njit(**_JIT)
def _cos_sin_f32(x):
    """``(cos x, sin x)`` in float64 for a float32 ``x``, to be rounded to float32.

    A float32 argument has 24 significant bits: the two-part reduction
    ``(x - k P1) - k (pi/2 - P1)`` leaves an error far below float32's ulp, and the
    polynomials need no tail term.
    """
    fn = (x * _INVPIO2 + _TOINT) - _TOINT
    r = (x - fn * _PIO2_1) - fn * _PIO2_1T
    z = r * r
    w = z * z
    s = r + r * z * (_S1 + z * (_S2 + z * (_S3 + z * _S4)) + z * w * (_S5 + z * _S6))
    c = (1.0 - 0.5 * z) + w * (_C1 + z * (_C2 + z * _C3) + w * z * (_C4 + z * (_C5 + z * _C6)))
    q = fn - 4.0 * np.floor(fn * 0.25)
    odd = (q == 1.0) | (q == 3.0)
    cs = s if odd else c
    sn = c if odd else s
    cos_sign = -1.0 if (q == 1.0) | (q == 2.0) else 1.0
    sin_sign = -1.0 if q >= 2.0 else 1.0
    return cs * cos_sign, sn * sin_sign


@numba.njit(**_JIT)
def _cos_f32(x):
    fn = (x * _INVPIO2 + _TOINT) - _TOINT
    r = (x - fn * _PIO2_1) - fn * _PIO2_1T
    z = r * r
    w = z * z
    s = r + r * z * (_S1 + z * (_S2 + z * (_S3 + z * _S4)) + z * w * (_S5 + z * _S6))
    c = (1.0 - 0.5 * z) + w * (_C1 + z * (_C2 + z * _C3) + w * z * (_C4 + z * (_C5 + z * _C6)))
    q = fn - 4.0 * np.floor(fn * 0.25)
    odd = (q == 1.0) | (q == 3.0)
    cs = s if odd else c
    sign = -1.0 if (q == 1.0) | (q == 2.0) else 1.0
    return cs * sign


@numba.njit(**_JIT)
def _reduce_f32(x):
    """``(r, q)``, ``r`` reduced in float64 and rounded to float32, ``q = k mod 4``."""
    xd = np.float64(x)
    fn = (xd * _INVPIO2 + _TOINT) - _TOINT
    r = np.float32((xd - fn * _PIO2_1) - fn * _PIO2_1T)
    return r, np.int32(fn) & np.int32(3)


@numba.njit(**_JIT)
def _sin_cos_poly32(r):
    """``(sin r, cos r)`` in float32 arithmetic for ``|r| <= pi/4``."""
    z = r * r
    s = r + r * z * (_FS1 + z * (_FS2 + z * (_FS3 + z * _FS4)))
    c = _ONE32 + z * (_FC0 + z * (_FC1 + z * (_FC2 + z * _FC3)))
    return s, c


@numba.njit(**_JIT)
def _cos_v2(x):
    """cos of a float32 ``x`` by version 2 (valid for ``|x| <= REDUCTION_LIMIT``)."""
    r, q = _reduce_f32(x)
    s, c = _sin_cos_poly32(r)
    cs = s if (q & 1) == 1 else c
    return -cs if (q == 1) | (q == 2) else cs


@numba.njit(**_JIT)
def _cos_sin_v2(x):
    """``(cos x, sin x)`` of a float32 ``x`` by version 2."""
    r, q = _reduce_f32(x)
    s, c = _sin_cos_poly32(r)
    odd = (q & 1) == 1
    cs = s if odd else c
    sn = c if odd else s
    return (-cs if (q == 1) | (q == 2) else cs), (-sn if q >= 2 else sn)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_rows_v2(proj, offset, scale, out, out_row0):
    """:func:`_cos_rows32` by version 2; returns whether some argument was out of range."""
    n, m = proj.shape
    bad = False
    for i in range(n):
        dest = out[out_row0 + i]
        src = proj[i]
        for j in range(m):
            x = src[j] + offset[j]
            bad |= not (abs(x) <= _F32_LIMIT)
            dest[j] = _cos_v2(x) * scale
    return bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_inplace_v2(block, offset, scale):
    """:func:`_cos_rows_v2` in place: a loop of its own, as :func:`_cos_inplace32` says
    why (one array read and written vectorises, two views of it would not)."""
    n, m = block.shape
    bad = False
    for i in range(n):
        row = block[i]
        for j in range(m):
            x = row[j] + offset[j]
            bad |= not (abs(x) <= _F32_LIMIT)
            row[j] = _cos_v2(x) * scale
    return bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_sin_rows_v2(proj, scale, out, out_row0):
    """:func:`_cos_sin_rows32` by version 2."""
    n, m = proj.shape
    bad = False
    for i in range(n):
        cos_out = out[out_row0 + i, :m]
        sin_out = out[out_row0 + i, m:]
        src = proj[i]
        for j in range(m):
            x = src[j]
            bad |= not (abs(x) <= _F32_LIMIT)
            c, s = _cos_sin_v2(x)
            cos_out[j] = c * scale
            sin_out[j] = s * scale
    return bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_sin_1d_v2(x, cos_out, sin_out):
    for i in range(x.shape[0]):
        c, s = _cos_sin_v2(x[i])
        cos_out[i] = c
        sin_out[i] = s


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_rows32(proj, offset, scale, out, out_row0):
    n, m = proj.shape
    bad = 0
    for i in range(n):
        dest = out[out_row0 + i]
        src = proj[i]
        for j in range(m):
            v = src[j] + offset[j]
            x = np.float64(v)
            bad += 0 if abs(x) <= REDUCTION_LIMIT else 1
            dest[j] = _cos_f32(x)
            dest[j] *= scale
    return bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_sin_rows32(proj, scale, out, out_row0):
    n, m = proj.shape
    bad = 0
    for i in range(n):
        cos_out = out[out_row0 + i, :m]
        sin_out = out[out_row0 + i, m:]
        src = proj[i]
        for j in range(m):
            x = np.float64(src[j])
            bad += 0 if abs(x) <= REDUCTION_LIMIT else 1
            c, s = _cos_sin_f32(x)
            cos_out[j] = c
            cos_out[j] *= scale
            sin_out[j] = s
            sin_out[j] *= scale
    return bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_rows(proj, offset, scale, out, out_row0):
    """``out[out_row0 + i, j] = scale * cos(proj[i, j] + offset[j])``; count out-of-range."""
    n, m = proj.shape
    bad = 0
    for i in range(n):
        dest = out[out_row0 + i]
        src = proj[i]
        for j in range(m):
            v = src[j] + offset[j]  # rounded in the input dtype, as before
            x = np.float64(v)
            bad += 0 if abs(x) <= REDUCTION_LIMIT else 1
            dest[j] = _cos(x)  # rounded once to the output dtype
            dest[j] *= scale
    return bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_sin_rows(proj, scale, out, out_row0):
    """``out[r, :m] = scale * cos(proj[i])``, ``out[r, m:2m] = scale * sin(proj[i])``.

    The two halves of a row are written through two slices: LLVM vectorises that
    loop, but not one that stores at ``j`` and ``m + j`` of the same row (about 10x
    slower).
    """
    n, m = proj.shape
    bad = 0
    for i in range(n):
        cos_out = out[out_row0 + i, :m]
        sin_out = out[out_row0 + i, m:]
        src = proj[i]
        for j in range(m):
            x = np.float64(src[j])
            bad += 0 if abs(x) <= REDUCTION_LIMIT else 1
            c, s = _cos_sin(x)
            cos_out[j] = c
            cos_out[j] *= scale
            sin_out[j] = s
            sin_out[j] *= scale
    return bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_inplace32(block, offset, scale):
    """``block[i, j] = scale * cos(block[i, j] + offset[j])`` as :func:`_cos_rows32`.

    One array read and written in place: LLVM vectorises it (two views of the same
    memory, as ``_cos_rows32(block, ..., block)``, would fail its overlap check and
    run the scalar loop).
    """
    n, m = block.shape
    bad = 0
    for i in range(n):
        row = block[i]
        for j in range(m):
            x = np.float64(row[j] + offset[j])
            bad += 0 if abs(x) <= REDUCTION_LIMIT else 1
            row[j] = _cos_f32(x)
            row[j] *= scale
    return bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_inplace(block, offset, scale):
    """:func:`_cos_rows` in place (see :func:`_cos_inplace32`)."""
    n, m = block.shape
    bad = 0
    for i in range(n):
        row = block[i]
        for j in range(m):
            x = np.float64(row[j] + offset[j])
            bad += 0 if abs(x) <= REDUCTION_LIMIT else 1
            row[j] = _cos(x)
            row[j] *= scale
    return bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_sin_1d(x, cos_out, sin_out):
    for i in range(x.shape[0]):
        c, s = _cos_sin(np.float64(x[i]))
        cos_out[i] = c
        sin_out[i] = s


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _cos_sin_1d32(x, cos_out, sin_out):
    for i in range(x.shape[0]):
        c, s = _cos_sin_f32(np.float64(x[i]))
        cos_out[i] = c
        sin_out[i] = s


def _check_version(version):
    if version not in VERSIONS:
        raise InvalidInputError(f"version must be one of {VERSIONS}, got {version!r}.")


def _float32_v2(dtype, version):
    _check_version(version)
    return dtype == np.float32 and version == 2


def _elementwise(x, version):
    x = np.asarray(x)
    dtype = x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    flat = np.ascontiguousarray(x, dtype=dtype).ravel()
    c = np.empty_like(flat)
    s = np.empty_like(flat)
    if _float32_v2(dtype, version):
        _cos_sin_1d_v2(flat, c, s)
    else:
        (_cos_sin_1d32 if dtype == np.float32 else _cos_sin_1d)(flat, c, s)
    bad = ~(np.abs(flat) <= REDUCTION_LIMIT)
    if bad.any():
        c[bad] = np.cos(flat[bad])
        s[bad] = np.sin(flat[bad])
    return c.reshape(x.shape), s.reshape(x.shape)


def cos(x, version=2):
    """Elementwise cosine by the compiled kernel (numpy's beyond :data:`REDUCTION_LIMIT`).

    ``version`` (see :data:`VERSIONS`) matters for float32 only.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(-100, 100, 1001)
    >>> bool(np.allclose(cos(x), np.cos(x), rtol=0, atol=1e-15))
    True
    """
    return _elementwise(x, version)[0]


def sin(x, version=2):
    """Elementwise sine by the compiled kernel (numpy's beyond :data:`REDUCTION_LIMIT`)."""
    return _elementwise(x, version)[1]


def cos_features_block(proj, offset, scale, out, out_row0=0, version=2):
    """Fill ``out[out_row0:out_row0+n]`` with ``scale * cos(proj + offset)``.

    ``proj + offset`` and the product with ``scale`` are rounded in the dtype of
    ``out`` (that of ``proj``); the cosine is evaluated in float64 and rounded once
    (float32 by version 1), or in float32 arithmetic after a float64 reduction (float32
    by version 2). Arguments beyond :data:`REDUCTION_LIMIT` (or NaN) are recomputed
    with ``np.cos``.

    Parameters
    ----------
    proj : ndarray of shape (n, m), C-contiguous
    offset : ndarray of shape (m,), dtype of ``proj``
    scale : scalar of the dtype of ``proj``
    out : ndarray of shape (N, m), C-contiguous, dtype of ``proj``
    out_row0 : int
    version : {1, 2}, default=2
        The kernel version (:data:`VERSIONS`); float64 is the same in both.
    """
    scale = out.dtype.type(scale)
    if _float32_v2(out.dtype, version):
        bad = _cos_rows_v2(proj, offset, scale, out, np.int64(out_row0))
    else:
        kernel = _cos_rows32 if out.dtype == np.float32 else _cos_rows
        bad = kernel(proj, offset, scale, out, np.int64(out_row0))
    if bad:
        v = proj + offset
        mask = ~(np.abs(v) <= REDUCTION_LIMIT)
        block = out[out_row0:out_row0 + proj.shape[0]]
        block[mask] = np.cos(v[mask]) * scale
    return out


def cos_features_inplace(block, offset, scale, version=2):
    """Replace ``block`` by ``scale * cos(block + offset)``, unless an argument is out of range.

    The rounding is that of :func:`cos_features_block` (the same kernel, reading and
    writing each element in place), so the bits are the same.

    Parameters
    ----------
    block : ndarray of shape (n, m), C-contiguous, float32 or float64
    offset : ndarray of shape (m,), dtype of ``block``
    scale : scalar
    version : {1, 2}, default=2

    Returns
    -------
    bool
        False when some ``|block + offset|`` exceeds :data:`REDUCTION_LIMIT` (or is
        NaN): ``block`` is then overwritten and must be recomputed with
        :func:`cos_features_block` from the projections.
    """
    scale = block.dtype.type(scale)
    if _float32_v2(block.dtype, version):
        return not _cos_inplace_v2(block, offset, scale)
    kernel = _cos_inplace32 if block.dtype == np.float32 else _cos_inplace
    return kernel(block, offset, scale) == 0


def cos_sin_features_block(proj, scale, out, out_row0=0, version=2):
    """Fill ``out[out_row0:out_row0+n]`` with ``scale * [cos(proj), sin(proj)]``.

    ``out`` has ``2 m`` columns for ``proj`` of ``m``; rounding and ``version`` as
    :func:`cos_features_block`.
    """
    scale = out.dtype.type(scale)
    if _float32_v2(out.dtype, version):
        bad = _cos_sin_rows_v2(proj, scale, out, np.int64(out_row0))
    else:
        kernel = _cos_sin_rows32 if out.dtype == np.float32 else _cos_sin_rows
        bad = kernel(proj, scale, out, np.int64(out_row0))
    if bad:
        m = proj.shape[1]
        mask = ~(np.abs(proj) <= REDUCTION_LIMIT)
        block = out[out_row0:out_row0 + proj.shape[0]]
        block[:, :m][mask] = np.cos(proj[mask]) * scale
        block[:, m:][mask] = np.sin(proj[mask]) * scale
    return out
