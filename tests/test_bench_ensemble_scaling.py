"""The pure logic of benchmarks/bench_ensemble_scaling.py: the augmentation and the crossover.

The benchmark's numbers go in RESULTS.md; these check that what it trains on is what its
section says (shifted copies with their own labels, nested sets) and that the crossover it
reports is where the two curves cross.
"""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ensemble_scaling as bench  # noqa: E402


def test_docstring_examples():
    assert doctest.testmod(bench).failed == 0


@pytest.mark.parametrize("dx, dy", bench.SHIFTS)
def test_shift_moves_every_pixel_and_zeroes_what_enters(dx, dy):
    side = bench.SIDE
    image = np.random.default_rng(0).random((side, side))
    out = bench.shift_images(image.reshape(1, -1), dx, dy).reshape(side, side)
    for r in range(side):
        for c in range(side):
            r0, c0 = r - dy, c - dx  # the source pixel
            inside = 0 <= r0 < side and 0 <= c0 < side
            assert out[r, c] == (image[r0, c0] if inside else 0.0)


def test_augmented_rows_are_shifted_images_with_their_labels():
    rng = np.random.default_rng(1)
    n_images = 40
    X = rng.random((n_images, bench.SIDE**2)).astype(np.float32)
    y = rng.integers(0, 10, n_images)
    total = bench.augmented_size(n_images)
    Xa, ya = bench.augmented_rows(X, y, total, seed=3)
    assert Xa.shape == (total, X.shape[1]) and Xa.dtype == X.dtype and ya.shape == (total,)
    # every (shift, image) pair exactly once, with the image's label
    expected = {}
    for dx, dy in bench.SHIFTS:
        shifted = bench.shift_images(X, dx, dy)
        for i in range(n_images):
            expected[(shifted[i].tobytes(), y[i])] = expected.get((shifted[i].tobytes(), y[i]),
                                                                   0) + 1
    got = {}
    for row, label in zip(Xa, ya, strict=True):
        got[(row.tobytes(), label)] = got.get((row.tobytes(), label), 0) + 1
    assert got == expected
    # nested: a smaller n is a prefix of a larger one (same seed)
    X_small, y_small = bench.augmented_rows(X, y, 100, seed=3)
    np.testing.assert_array_equal(X_small, Xa[:100])
    np.testing.assert_array_equal(y_small, ya[:100])
    with pytest.raises(ValueError, match="augmented set"):
        bench.augmented_rows(X, y, total + 1)


@pytest.mark.parametrize("factor", [0.5, 0.8])
def test_crossover_between_measured_points(factor):
    # SVC t = n^2 / 1e8 measured to 1e5; ensemble t = factor * n / 1e3: equal at factor * 1e5
    ns = [1e4, 3e4, 1e5, 3e5]
    svc = {n: n**2 / 1e8 for n in ns[:3]}
    ens = {n: factor * n / 1e3 for n in ns}
    c = bench.crossover(ens, svc)
    assert c["how"] == "measured" and c["n"] == pytest.approx(factor * 1e5, rel=1e-6)


def test_crossover_extrapolates_the_svc_from_its_last_points():
    # SVC slope 1 at first, then n^2 over its last three points; it stops at 1e4.
    svc = {1e2: 1.0, 1e3: 1.0, 2e3: 4.0, 5e3: 25.0, 1e4: 100.0}
    ens = {1e3: 1e4, 1e6: 1e4}  # flat 1e4 s: equal to 1e-6 n^2 at n = 1e5
    c = bench.crossover(ens, svc)
    assert c["how"] == "extrapolated" and c["b"] == pytest.approx(2.0)
    assert c["n"] == pytest.approx(1e5, rel=1e-6)


def test_crossover_below_and_never():
    svc = {1e3: 10.0, 1e4: 100.0}
    assert bench.crossover({1e3: 1.0, 1e4: 5.0}, svc) == {"n": 1e3, "how": "below",
                                                          "b": pytest.approx(1.0)}
    assert bench.crossover({1e3: 20.0, 1e4: 200.0}, svc)["how"] == "never"
    # faster at first, slower at the end: not "from" any n
    assert bench.crossover({1e3: 1.0, 1e5: 1e4}, svc)["n"] is None
