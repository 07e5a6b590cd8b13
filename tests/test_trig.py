"""The compiled cosine/sine of dkrp.features._trig: accuracy, fallback, determinism,
and the spec field that keeps old specs on numpy's cosine."""

import json
import subprocess
import sys

import numpy as np
import pytest

import dkrp
from dkrp.features import _trig
from dkrp.features.fourier import cosine_features


def _ulps(a, b):
    """|a - b| in units in the last place of the larger, in the dtype of ``b``."""
    b = np.asarray(b)
    larger = np.maximum(np.abs(np.asarray(a, dtype=b.dtype)), np.abs(b))
    diff = np.abs(np.asarray(a, dtype=np.float64) - b.astype(np.float64))
    return diff / np.spacing(larger).astype(np.float64)


def _sample():
    rng = np.random.default_rng(0)
    limit = _trig.REDUCTION_LIMIT
    multiples = np.arange(-20000, 20000) * (np.pi / 2)  # next to multiples of pi/2
    return np.concatenate([
        rng.uniform(-30, 30, 400_000),
        rng.uniform(-limit, limit, 200_000),
        rng.standard_normal(50_000) * 1e-6,
        multiples, np.nextafter(multiples, np.inf), np.nextafter(multiples, -np.inf),
        [0.0, -0.0, np.pi / 4, -np.pi / 4, limit, -limit, np.nextafter(limit, 0)],
        # beyond the exact range: numpy's fallback
        [np.nextafter(limit, np.inf), 3e6, -1e9, 1e15, 1e300, -1e300],
        rng.uniform(-1e12, 1e12, 1000),
    ])


def test_cos_and_sin_within_2_ulp_of_numpy():
    x = _sample()
    assert _ulps(_trig.cos(x), np.cos(x)).max() <= 2
    assert _ulps(_trig.sin(x), np.sin(x)).max() <= 2


def test_beyond_the_reduction_range_numpy_is_used():
    x = np.array([np.nextafter(_trig.REDUCTION_LIMIT, np.inf), 1e9, -1e15, 1e300])
    assert _trig.cos(x).tobytes() == np.cos(x).tobytes()
    assert _trig.sin(x).tobytes() == np.sin(x).tobytes()
    with np.errstate(invalid="ignore"):  # numpy's cos(inf) warns, as np.cos does
        assert np.isnan(_trig.cos(np.array([np.nan, np.inf]))).all()


def _projector(proj, into_out):
    """A ``project(start, stop, out=None)`` that fills ``out`` when ``into_out``, as a
    GEMM into the output block does, else returns a new array."""

    def project(start, stop, out=None):
        if into_out and out is not None:
            out[...] = proj[start:stop]
            return out
        return proj[start:stop].copy()

    return project


@pytest.mark.parametrize("cosine", ["dkrp2", "dkrp"])
@pytest.mark.parametrize("into_out", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("feature_map", ["cos", "cos_sin"])
def test_fused_features_match_numpy_cosine(dtype, feature_map, into_out, cosine):
    rng = np.random.default_rng(1)
    n, m = 700, 33
    proj = (rng.standard_normal((n, m)) * 20).astype(dtype)
    proj[5, 3] = 5e6  # one argument beyond the exact range, in one block
    offset = rng.uniform(0, 2 * np.pi, m).astype(dtype)
    if feature_map == "cos_sin":
        offset[:] = 0
    k = m if feature_map == "cos" else 2 * m
    scale = np.sqrt(2.0 / k)

    def run(cosine):
        return cosine_features(n, dtype, _projector(proj, into_out), offset, k,
                               feature_map, scale, cosine=cosine)

    ours, numpys = run(cosine), run("numpy")
    assert ours.dtype == dtype
    # one rounding of the cosine apart, then the same product with the scale
    assert _ulps(ours, numpys).max() <= 2
    if feature_map == "cos":
        # the fallback is numpy's, also when the block was projected into the output
        # and overwritten in place before the out-of-range argument was seen
        assert ours[5, 3] == numpys[5, 3]
    # projecting into the output block and replacing it in place gives the same bits
    other = cosine_features(n, dtype, _projector(proj, not into_out), offset, k, feature_map,
                            scale, cosine=cosine)
    assert ours.tobytes() == other.tobytes()


_CHILD = """
import hashlib, numpy as np, dkrp
X = np.cos(np.arange(300 * 20, dtype=np.float64)).reshape(300, 20) * 3
h = hashlib.sha256()
for fm in ("cos", "cos_sin"):
    rff = dkrp.RandomFourierFeatures(gamma=0.7, n_components=512, feature_map=fm,
                                     random_state=3).fit(X)
    for dt in (np.float64, np.float32):
        h.update(rff.transform(X.astype(dt)).tobytes())
print(h.hexdigest())
"""


def test_two_processes_give_byte_identical_features():
    digests = {subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                              check=True).stdout for _ in range(2)}
    assert len(digests) == 1


def test_new_specs_record_the_compiled_cosine_and_old_specs_keep_numpys():
    X = np.random.default_rng(2).standard_normal((50, 6))
    rff = dkrp.RandomFourierFeatures(gamma=0.5, n_components=10, random_state=5).fit(X)
    spec = rff.to_spec()
    assert rff.cosine_ == "dkrp2" and spec["fitted"]["cosine_"] == "dkrp2"
    rebuilt = dkrp.from_spec(json.loads(json.dumps(spec)))
    assert rebuilt.cosine_ == "dkrp2"
    assert rebuilt.transform(X).tobytes() == rff.transform(X).tobytes()
    del spec["fitted"]["cosine_"], spec["params_checksum"]  # as written by dkrp <= 0.1.x
    legacy = dkrp.from_spec(spec)
    assert legacy.cosine_ == "numpy"
    old = np.sqrt(2.0 / 10) * np.cos(X @ legacy.random_weights_.T + legacy.random_offset_)
    assert legacy.transform(X).tobytes() == old.tobytes()
    assert legacy.to_spec()["fitted"]["cosine_"] == "numpy"  # and stays so when re-saved
    spec["fitted"]["cosine_"] = "fast"
    with pytest.raises(ValueError, match="cosine_"):
        dkrp.from_spec(spec)


@pytest.mark.parametrize("version", _trig.VERSIONS)
def test_float32_within_2_ulp_of_numpy_and_1_ulp_of_the_rounded_exact_value(version):
    x = _sample()
    x = x[np.abs(x) < 1e30].astype(np.float32)
    exact = _trig.cos(x.astype(np.float64)).astype(np.float32)
    for ours, ref, exact_ in ((_trig.cos(x, version), np.cos(x), exact),
                              (_trig.sin(x, version), np.sin(x),
                               _trig.sin(x.astype(np.float64)).astype(np.float32))):
        assert ours.dtype == np.float32
        assert _ulps(ours, ref).max() <= 2
        assert _ulps(ours, exact_).max() <= 1


@pytest.mark.parametrize("version", _trig.VERSIONS)
def test_the_argument_is_rounded_in_the_input_dtype_as_before(version):
    proj = np.full((1, 16), 1e6, dtype=np.float32)  # float32 ulp 0.0625 there
    offset = np.full(16, 0.03, dtype=np.float32)
    out = np.empty_like(proj)
    _trig.cos_features_block(proj, offset, 1.0, out, version=version)
    v = proj + offset  # float32: 1e6 exactly
    # cos(1e6 + 0.03) is 0.026 away: a sum kept in float64 would be 10**5 ulp off
    assert _ulps(out[0], np.float32(np.cos(np.float64(v[0, 0])))).max() <= 1


def test_the_float32_versions_differ_in_the_last_bit_and_float64_does_not():
    # why a spec records its version: version 2's float32 polynomials round otherwise
    x = np.random.default_rng(3).uniform(-30, 30, 100_000)
    for f in (_trig.cos, _trig.sin):
        v1, v2 = f(x.astype(np.float32), 1), f(x.astype(np.float32), 2)
        assert 0 < np.count_nonzero(v1 != v2) < x.size // 2
        assert _ulps(v1, v2).max() <= 2
        assert f(x, 1).tobytes() == f(x, 2).tobytes()
    with pytest.raises(ValueError, match="version must be one of"):
        _trig.cos(x, 3)


@pytest.mark.parametrize("version", _trig.VERSIONS)
def test_an_argument_out_of_range_in_any_row_of_a_block_takes_the_fallback(version):
    # version 2 ORs one flag per value: a single one in the middle of a block counts
    rng = np.random.default_rng(4)
    block = rng.uniform(-5, 5, (7, 40)).astype(np.float32)
    offset = np.zeros(40, np.float32)
    for row, col in ((3, 17), (6, 39), (0, 0)):
        bad = block.copy()
        bad[row, col] = 3e6
        assert not _trig.cos_features_inplace(bad.copy(), offset, 1.0, version)
        out = np.empty_like(bad)
        _trig.cos_features_block(bad, offset, 1.0, out, version=version)
        assert out[row, col] == np.cos(np.float32(3e6))
        pair = np.empty((7, 80), np.float32)
        _trig.cos_sin_features_block(bad, 1.0, pair, version=version)
        assert pair[row, col] == np.cos(np.float32(3e6))
        assert pair[row, 40 + col] == np.sin(np.float32(3e6))
    assert _trig.cos_features_inplace(block.copy(), offset, 1.0, version)
