"""``--standardize`` and ``--scale-rows``: the scaling a map learns and carries in its spec
(:mod:`dkrp.preprocessing`; issue 28, item 6).

What a user relies on: the statistics are the training rows' own (a constant column left
unscaled), every input kind (numpy, float32, sparse, dask) is scaled the same way, sparse
input is refused only where centring would make it dense and the message says what to do
instead, a spec's scaling is checked when it is read back, and the spec checksum of a
scaled map is stable across versions. In memory and on dask's local scheduler.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

import dkrp
from dkrp.errors import InvalidInputError
from dkrp.preprocessing import (
    ScalingOptions,
    check_options,
    check_preprocessing,
    checksum,
    describe,
    fit_preprocessing,
    fit_scaled,
    preprocess,
    sparse_refusal,
)

#: pixel-like columns in another unit each, one constant column
X = np.random.default_rng(7).uniform(0, 255, (40, 5)) * np.array([1.0, 0.01, 100.0, 1.0, 1.0])
X[:, 3] = 17.0


def test_options_are_normalised_and_a_wrong_row_scaling_is_refused():
    assert check_options(1, "unit") == (True, "unit")
    assert check_options(0, None) == (False, None)
    assert ScalingOptions(standardize=1, scale_rows="unit") == ScalingOptions(
        standardize=True, scale_rows="unit")
    assert ScalingOptions(standardize=1).standardize is True
    assert [ScalingOptions().asked, ScalingOptions(standardize=True).asked,
            ScalingOptions(scale_rows="unit").asked] == [False, True, True]
    for make in (lambda: check_options(False, "l2"), lambda: ScalingOptions(scale_rows="l2")):
        with pytest.raises(InvalidInputError) as err:
            make()
        assert str(err.value) == "scale_rows must be None or one of ('unit',), got 'l2'."


def test_standardize_learns_the_training_mean_and_std_and_leaves_constant_columns():
    prep = fit_preprocessing(X, standardize=True)
    assert set(prep) == {"standardize"}
    mean, scale = prep["standardize"]["mean"], prep["standardize"]["scale"]
    assert isinstance(mean, list) and isinstance(scale, list)  # JSON-able, for the spec
    expected = X.std(axis=0)
    expected[3] = 1.0  # the constant column is left unscaled, as StandardScaler does
    np.testing.assert_allclose(mean, X.mean(axis=0), rtol=1e-15)
    np.testing.assert_allclose(scale, expected, rtol=1e-14)
    # float32 rows and a dask array of them: the statistics in float64, the same values
    X32 = X.astype(np.float32)
    from_numpy = fit_preprocessing(X32, standardize=True)
    from_dask = fit_preprocessing(da.from_array(X32, chunks=(7, 5)), standardize=True)
    np.testing.assert_allclose(from_dask["standardize"]["mean"],
                               from_numpy["standardize"]["mean"], rtol=1e-14)
    np.testing.assert_allclose(from_dask["standardize"]["scale"],
                               from_numpy["standardize"]["scale"], rtol=1e-12)
    np.testing.assert_allclose(from_numpy["standardize"]["mean"],
                               X32.astype(np.float64).mean(axis=0), rtol=1e-15)


def test_standardize_of_a_dask_array_brings_back_only_the_statistics():
    # a dataset larger than the client's memory: the rows stay on the workers
    import dask

    returned = []

    def get(dsk, keys, **kwargs):
        results = dask.get(dsk, keys, **kwargs)
        returned.extend(dask.core.flatten(results))
        return results

    rows = da.from_array(np.tile(X, (50, 1)), chunks=(100, 5))  # 2,000 rows
    with dask.config.set(scheduler=get):
        prep = fit_preprocessing(rows, standardize=True)
    assert sum(np.asarray(r).nbytes for r in returned) <= 4 * 5 * 8  # a few 5-vectors
    np.testing.assert_allclose(prep["standardize"]["mean"], X.mean(axis=0), rtol=1e-13)


def test_rows_in_a_zarr_array_are_scaled_as_numpy_rows(tmp_path):
    # an array with chunks that is not a dask array (zarr, h5py) is read as numpy rows
    import zarr

    rows = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, dtype=X.dtype,
                           chunks=(10, 5))
    rows[:] = X
    prep = fit_preprocessing(rows, standardize=True, scale_rows="unit")
    assert prep == fit_preprocessing(X, standardize=True, scale_rows="unit")
    assert preprocess(rows, prep).tobytes() == preprocess(X, prep).tobytes()


def test_a_column_constant_up_to_rounding_is_left_unscaled_and_a_narrow_one_is_not():
    big = np.full((30, 2), 1e6)
    big[:, 0] += np.tile([0.0, 1e-6], 15)  # a real spread, tiny next to the mean
    big[:, 1] = np.float64(1e6) + np.tile([0.0, np.spacing(1e6)], 15)  # rounding noise
    scale = fit_preprocessing(big, standardize=True)["standardize"]["scale"]
    assert scale[0] == pytest.approx(0.5e-6, rel=1e-3) and scale[1] == 1.0
    # small measurements (SI units: femtometres) that do vary are scaled, not taken for
    # a constant
    small = np.tile([[0.0], [6e-15]], (15, 1))
    assert fit_preprocessing(small, standardize=True)["standardize"]["scale"] == [
        pytest.approx(3e-15, rel=1e-12)]


def test_unit_rows_alone_learn_nothing_and_no_scaling_is_none():
    assert fit_preprocessing(X) is None
    assert fit_preprocessing(X, standardize=False, scale_rows=None) is None
    assert fit_preprocessing(X, scale_rows="unit") == {"scale_rows": "unit"}
    both = fit_preprocessing(X, standardize=True, scale_rows="unit")
    assert list(both) == ["standardize", "scale_rows"] and both["scale_rows"] == "unit"
    # sparse input may be scaled to unit rows (it stays sparse)
    assert fit_preprocessing(sp.csr_matrix(X), scale_rows="unit") == {"scale_rows": "unit"}


STANDARDIZE_SPARSE = (
    "standardize=True centres every column, which would make sparse input dense. Use "
    "scale_rows='unit', or ingest the data densely (dkrp.io.ingest(..., sparse=False)).")


def test_sparse_input_is_refused_only_where_centring_would_make_it_dense():
    S = sp.csr_matrix(X)
    dask_sparse = da.from_array(S, chunks=(10, 5), asarray=False)
    for sparse in (S, sp.csc_matrix(X), dask_sparse):
        assert sparse_refusal(sparse, standardize=True) == STANDARDIZE_SPARSE
        assert sparse_refusal(sparse) is None
        assert sparse_refusal(sparse, prep={"scale_rows": "unit"}) is None
    for dense in (X, da.from_array(X, chunks=(10, 5))):
        assert sparse_refusal(dense, standardize=True) is None
        assert sparse_refusal(dense, prep={"standardize": {}}) is None
    with pytest.raises(InvalidInputError) as err:
        fit_preprocessing(S, standardize=True, scale_rows="unit")
    assert str(err.value) == STANDARDIZE_SPARSE
    # a map fitted with standardize, applied to a sparse test set
    assert sparse_refusal(S, prep={"standardize": {"mean": [], "scale": []}},
                          where="test.zarr") == (
        "test.zarr is sparse, and the fitted map standardizes its input (it was fitted with "
        "standardize=True): centring every column would make it dense. Ingest test.zarr "
        "densely (dkrp.io.ingest(..., sparse=False)) to apply this map, or fit the map again "
        "without standardize=True, e.g. with scale_rows='unit', which keeps sparse rows "
        "sparse.")
    assert sparse_refusal(S, prep={"standardize": {}}).startswith("the input is sparse, ")


def test_preprocess_scales_numpy_sparse_and_dask_rows_alike_keeping_float32():
    prep = fit_preprocessing(X, standardize=True, scale_rows="unit")
    stats = prep["standardize"]
    expected = (X - stats["mean"]) / np.array(stats["scale"])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    got = preprocess(X, prep)
    np.testing.assert_allclose(got, expected, rtol=1e-13)
    assert got.dtype == np.float64
    got32 = preprocess(X.astype(np.float32), prep)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, expected, rtol=2e-5, atol=1e-6)
    assert preprocess(X.astype(np.int64), prep).dtype == np.float64  # integers in float64
    lazy = preprocess(da.from_array(X, chunks=(10, 5)), prep)
    assert isinstance(lazy, da.Array) and lazy.dtype == np.float64
    assert lazy.compute().tobytes() == got.tobytes()
    # integer rows (pixels) come back as float64, and a lazy result says so: dask computes
    # its reductions in the declared dtype
    pixels = da.from_array(X.astype(np.uint8), chunks=(10, 5))
    lazy = preprocess(pixels, prep)
    assert lazy.dtype == np.float64 and lazy._meta.dtype == np.float64
    np.testing.assert_allclose(lazy.sum(axis=0).compute(),
                               preprocess(X.astype(np.uint8), prep).sum(axis=0), rtol=1e-12)
    # float32 rows standardized stay float32 (the statistics are cast to them)
    stand = {"standardize": stats}
    assert preprocess(X.astype(np.float32), stand).dtype == np.float32
    assert preprocess(da.from_array(X.astype(np.float32), chunks=10), stand).dtype == np.float32
    # unit rows of sparse rows: still sparse, the same values; an all-zero row stays zero
    S = X.copy()
    S[S < 100] = 0.0
    S[4] = 0.0
    unit = {"scale_rows": "unit"}
    for rows in (S, sp.csr_matrix(S), sp.csr_matrix(S.astype(np.float32))):
        out = preprocess(rows, unit)
        dense = out.toarray() if sp.issparse(out) else out
        assert sp.issparse(out) == sp.issparse(rows) and out.dtype == rows.dtype
        zero = ~S.any(axis=1)
        assert zero[4] and not dense[zero].any() and not np.isnan(dense).any()
        np.testing.assert_allclose(np.linalg.norm(dense[~zero], axis=1), 1.0, rtol=1e-6)
        np.testing.assert_allclose(dense, preprocess(S, unit), rtol=1e-6)
    assert preprocess(X, None) is X and preprocess(X, {}) is X


def test_unit_rows_of_uint8_pixels_are_computed_in_float64():
    # squares of pixels overflow uint8 (200**2 = 40000): the norms must not be taken in it
    pixels = np.random.default_rng(2).integers(0, 256, (20, 9)).astype(np.uint8)
    pixels[pixels < 128] = 0
    expected = pixels / np.linalg.norm(pixels.astype(np.float64), axis=1, keepdims=True)
    for rows in (pixels, sp.csr_matrix(pixels)):
        out = preprocess(rows, {"scale_rows": "unit"})
        out = out.toarray() if sp.issparse(out) else out
        assert out.dtype == np.float64
        np.testing.assert_allclose(out, expected, rtol=1e-14)


def test_a_standardizing_map_refuses_sparse_rows_and_uses_cached_statistics():
    prep = fit_preprocessing(X, standardize=True)
    with pytest.raises(InvalidInputError) as err:
        preprocess(sp.csr_matrix(X), prep)
    assert str(err.value) == ("A standardizing map cannot take sparse input (centring makes "
                              "it dense); pass the rows densely.")
    asked = []

    def cast(name, values, dtype):
        asked.append((name, np.dtype(dtype)))
        return np.asarray(values, dtype=dtype)

    preprocess(X.astype(np.float32), prep, cast=cast)
    assert asked == [("mean", np.dtype(np.float32)), ("scale", np.dtype(np.float32))]


def test_a_spec_with_malformed_scaling_is_refused_naming_what_is_wrong():
    good = {"standardize": {"mean": [0.0, 1.0], "scale": [1.0, 2]}, "scale_rows": "unit"}
    assert check_preprocessing(good, 2) is good
    assert check_preprocessing({"scale_rows": "unit"}, 2) == {"scale_rows": "unit"}
    cases = [
        ([], "preprocessing must be a dict with keys standardize and/or scale_rows, got []."),
        ({"center": True}, "preprocessing must be a dict with keys standardize and/or "
                           "scale_rows, got {'center': True}."),
        ({"standardize": [0.0]}, "preprocessing.standardize must hold mean and scale."),
        ({"standardize": {"scale": [1.0, 1.0]}},
         "preprocessing.standardize.mean must be a list of 2 numbers."),
        ({"standardize": {"mean": [0.0, 0.0], "scale": [1.0]}},
         "preprocessing.standardize.scale must be a list of 2 numbers."),
        ({"standardize": {"mean": [0.0, 0.0], "scale": (1.0, 1.0)}},
         "preprocessing.standardize.scale must be a list of 2 numbers."),
        ({"standardize": {"mean": [0.0, 0.0], "scale": [1.0, 0.0]}},
         "preprocessing.standardize.scale must be positive numbers."),
        ({"standardize": {"mean": [0.0, 0.0], "scale": [1.0, "2"]}},
         "preprocessing.standardize.scale must be positive numbers."),
        ({"scale_rows": "l2"}, "scale_rows must be None or one of ('unit',), got 'l2'."),
    ]
    for prep, message in cases:
        with pytest.raises(InvalidInputError) as err:
            check_preprocessing(prep, 2)
        assert str(err.value) == message, prep
    with pytest.raises(InvalidInputError, match=r"got \{'standardize': \{'mean': \[0, 0, 0"):
        check_preprocessing({"standardize": {"mean": [0] * 500}, "x": 1}, 2)


def test_the_checksum_of_a_scaled_map_is_stable_and_an_unscaled_one_unchanged():
    base = "d57f0de45329659c9a90516a07d3a0ab3326d8a4484bea91d2698ffe631a3c94"
    assert checksum(base, None) == base and checksum(base, {}) == base
    prep = {"standardize": {"mean": [0.5, 1.0], "scale": [2.0, 1.0]}, "scale_rows": "unit"}
    # a spec written today must verify in every later version: the value is pinned
    assert checksum(base, prep) == (
        "cbbe646a30802a8c275dc0cce26c3f5c0548cefff4adf461e0ae0596094891c8")
    assert checksum(base, dict(reversed(list(prep.items())))) == checksum(base, prep)
    assert checksum(base, {"scale_rows": "unit"}) != checksum(base, prep)


def test_the_scaling_is_described_for_info_and_refusals():
    assert describe(None) == "none" and describe({}) == "none"
    assert describe({"standardize": {}}) == "standardize"
    assert describe({"scale_rows": "unit"}) == "unit rows"
    assert describe({"standardize": {}, "scale_rows": "unit"}) == "standardize + unit rows"


def test_fit_scaled_fits_on_scaled_rows_and_the_spec_carries_the_scaling():
    rff = fit_scaled(dkrp.RandomFourierFeatures(n_components=8, random_state=0), X,
                     standardize=True, scale_rows="unit")
    prep = rff.preprocessing_
    assert prep == fit_preprocessing(X, standardize=True, scale_rows="unit")
    plain = dkrp.RandomFourierFeatures(n_components=8, random_state=0).fit(preprocess(X, prep))
    assert rff.transform(X).tobytes() == plain.transform(preprocess(X, prep)).tobytes()
    assert dkrp.from_spec(rff.to_spec()).transform(X).tobytes() == rff.transform(X).tobytes()
    # a data-dependent map samples its landmarks from the scaled rows
    nys = fit_scaled(dkrp.Nystroem(n_components=6, random_state=0), X, standardize=True)
    same = dkrp.Nystroem(n_components=6, random_state=0).fit(preprocess(X, nys.preprocessing_))
    assert nys.transform(X).tobytes() == same.transform(
        preprocess(X, nys.preprocessing_)).tobytes()
    unscaled = fit_scaled(dkrp.RandomFourierFeatures(n_components=8, random_state=0), X)
    assert getattr(unscaled, "preprocessing_", None) is None
    assert "preprocessing" not in unscaled.to_spec()["fitted"]
