"""The compiled float32 -> float16 cast of float16 feature stores: numpy's bits exactly.

A float16 store written before the compiled cast (numpy's ``astype``) and one written
after must hold the same bytes, and a store resumed across the change must too, so
the kernel is compared with numpy bit for bit on every rounding boundary of every
float32 exponent (where round-half-to-even, the subnormal range and the overflow to
infinity decide), on both signs, and on random bit patterns.
"""

import numpy as np
import pytest

from dkrp.errors import PartitionInputError
from dkrp.feature_store._half import float32_to_float16, nonfinite_half
from dkrp.feature_store.encoding import encode_block

#: low 13 bits (those float16 drops) around the half-way point, and its neighbours
_LOW = [0, 1, 0x7FF, 0x800, 0x801, 0xFFE, 0xFFF, 0x1000, 0x1001, 0x17FF, 0x1800, 0x1801,
        0x1FFF]


def _boundary_bits():
    e = np.arange(256, dtype=np.uint32)[:, None, None] << np.uint32(23)
    high = np.arange(1024, dtype=np.uint32)[None, :, None] << np.uint32(13)
    low = np.array(_LOW, dtype=np.uint32)[None, None, :]
    bits = (e | high | low).reshape(-1)
    return np.concatenate([bits, bits | np.uint32(0x80000000)])


def _numpy_half_bits(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float16).view(np.uint16)


def test_equals_numpy_on_every_rounding_boundary_of_every_exponent():
    bits = _boundary_bits()
    x = bits.view(np.float32)
    got = float32_to_float16(x).view(np.uint16)
    ref = _numpy_half_bits(x)
    finite = ~np.isnan(x)
    assert np.array_equal(got[finite], ref[finite])
    assert np.isnan(float32_to_float16(x[~finite])).all()


def test_equals_numpy_on_random_bit_patterns():
    bits = np.random.default_rng(7).integers(0, 2**32, 2_000_000, dtype=np.uint64)
    x = bits.astype(np.uint32).view(np.float32)
    x = x[~np.isnan(x)]
    assert np.array_equal(float32_to_float16(x).view(np.uint16), _numpy_half_bits(x))


@pytest.mark.parametrize(("value", "expected"), [
    (65504.0, 65504.0),            # largest finite float16
    (65519.996, 65504.0),          # just below the half-way point to 2**16
    (65520.0, np.inf),             # half way: ties to even is 2**16, infinity
    (2.0 ** -24, 2.0 ** -24),      # smallest subnormal
    (2.0 ** -25, 0.0),             # half of it: ties to even is zero
    (1.5 * 2.0 ** -25, 2.0 ** -24),
    (2.0 ** -14 - 2.0 ** -26, 2.0 ** -14),  # rounds up into the smallest normal
    (1.0 + 2.0 ** -11, 1.0),       # tie, even mantissa below
    (1.0 + 3 * 2.0 ** -11, 1.0 + 2.0 ** -9),  # tie, odd mantissa below: rounds up
    (-0.0, -0.0),
    (-np.inf, -np.inf),
])
def test_known_values(value, expected):
    got = float32_to_float16(np.array([value], dtype=np.float32))[0]
    assert got.tobytes() == np.float16(expected).tobytes()


def test_shape_and_order_are_kept():
    Z = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]  # not contiguous
    H = float32_to_float16(Z)
    assert H.shape == (4, 3) and H.dtype == np.float16 and H.flags.c_contiguous
    assert np.array_equal(H, Z.astype(np.float16))


def test_nonfinite_half_marks_inf_and_nan_only():
    H = np.array([0.0, -1.0, 65504.0, np.inf, -np.inf, np.nan, 6e-8], dtype=np.float16)
    assert nonfinite_half(H).tolist() == [False, False, False, True, True, True, False]


def test_encode_block_refuses_the_first_overflow_with_its_row_and_component():
    Z = np.ones((3, 4), dtype=np.float32)
    Z[2, 1] = 7e4
    Z[2, 3] = 9e4
    with pytest.raises(PartitionInputError, match=r"row 12, component 1: the feature value "
                                                  r"70000 does not fit float16"):
        encode_block(Z, np.dtype(np.float16), partition=5, row_offset=10)
    ok = encode_block(np.full((2, 2), 65519.0, np.float32), np.dtype(np.float16), 0, 0)
    assert ok.dtype == np.float16 and (ok == 65504.0).all()
