"""float32 to float16 (IEEE binary16) by integer arithmetic, the bits of numpy's cast.

A float16 feature store casts each computed chunk; numpy's ``astype(float16)`` runs
here at about 4.4 ns per value, more than half the cost of computing a KRP chunk
(benchmarks/RESULTS.md, ``bench_store_encodings``). This compiled kernel rounds the
same way -- to nearest, ties to even, in the subnormal range too; magnitudes from
65520 (half way between float16's largest finite value and the next power of two) up
become infinity; NaN stays NaN -- with integer operations only, which LLVM vectorises.
Tests compare it with numpy's cast bit for bit on every rounding boundary of every
exponent, so a store written through it holds the bytes numpy would have written.
"""

from __future__ import annotations

import numpy as np

from .._jit import numba

__all__ = []

_SIGN = np.uint32(0x80000000)
_ABS = np.uint32(0x7FFFFFFF)
#: |x| from here (65536.0 and above, inf, NaN) is not a finite float16 by rounding alone
_F16_LIMIT = np.uint32((127 + 16) << 23)
_F32_INF = np.uint32(255 << 23)
#: |x| below 2**-14 (float16's smallest normal) is a float16 subnormal or zero
_F16_MIN_NORMAL = np.uint32(113 << 23)
_REBIAS = np.uint32((((15 - 127) << 23) + 0xFFF) % 2**32)  # adds modulo 2**32


@numba.njit(cache=True, nogil=True, boundscheck=False)
def _to_half_bits(bits, out):
    for i in range(bits.size):
        f = bits[i]
        sign = (f & _SIGN) >> np.uint32(16)
        a = f & _ABS
        # normal float16: drop 13 mantissa bits, rounding half to even
        odd = (a >> np.uint32(13)) & np.uint32(1)
        normal = (a + _REBIAS + odd) >> np.uint32(13)
        # subnormal float16: the value in units of 2**-24, rounded half to even
        e = a >> np.uint32(23)
        m = (a & np.uint32(0x7FFFFF)) | np.uint32(0x800000)
        s = np.uint32(126) - e  # at least 14 here; 25 or more rounds to zero
        s = min(s, np.uint32(25))
        q = m >> s
        rem = m & ((np.uint32(1) << s) - np.uint32(1))
        half = np.uint32(1) << (s - np.uint32(1))
        q += np.uint32((rem > half) | ((rem == half) & ((q & np.uint32(1)) == 1)))
        sub = q if e != 0 else np.uint32(0)  # float32 subnormals are below 2**-126
        big = np.uint32(0x7E00) if a > _F32_INF else np.uint32(0x7C00)
        h = big if a >= _F16_LIMIT else (normal if a >= _F16_MIN_NORMAL else sub)
        out[i] = np.uint16(h | sign)


def float32_to_float16(Z) -> np.ndarray:
    """``Z.astype(numpy.float16)`` for a float32 array, bit for bit, by a compiled kernel.

    Parameters
    ----------
    Z : ndarray of float32

    Returns
    -------
    ndarray of float16, of ``Z``'s shape (C order)
    """
    Z = np.ascontiguousarray(Z, dtype=np.float32)
    out = np.empty(Z.shape, dtype=np.float16)
    _to_half_bits(Z.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16))
    return out


def nonfinite_half(H) -> np.ndarray:
    """Boolean mask of the infinite or NaN values of a float16 array (exponent all ones)."""
    bits = H.view(np.uint16)
    return (bits & np.uint16(0x7C00)) == np.uint16(0x7C00)
