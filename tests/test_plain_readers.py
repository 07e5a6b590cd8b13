"""What a reader that does not know dkrp sees in a feature store (issue 29, case 7).

Plain ``zarr`` and ``xarray.open_zarr`` read a deleted chunk as the fill value with no
error while the group says ``complete: true``, and a bit store's packed signs as uint8.
The format cannot make those reads fail; the store's arrays say what they hold and how
to check, and ``dkrp.open_xarray`` gives xarray users the checked read. Real stores on
disk, written on dask's local scheduler.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr

import dkrp
from dkrp.errors import ChunkError
from dkrp.feature_store import FeatureStoreError, open_features

FIXTURES = Path(__file__).parent / "fixtures"
M = 20  # signs per row of the bit store: 3 bytes, the last one padded


@pytest.fixture
def rows():
    rng = np.random.default_rng(5)
    return rng.standard_normal((100, 6)), rng.integers(0, 3, 100)


def _float_store(path, rows):
    X, y = rows
    krp = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16, random_state=1)
    dkrp.featurize_to_store(da.from_array(X, chunks=(25, 6)), path, krp, labels=y,
                            progress=False)
    return path


def _bit_store(path, rows):
    X, y = rows
    spe = dkrp.SignProductEmbedding(n_components=M, random_state=2)
    dkrp.featurize_to_store(da.from_array(X, chunks=(25, 6)), path, spe, labels=y,
                            bits=True, progress=False)
    return path


def test_plain_zarr_reads_a_deleted_chunk_as_nan_and_the_array_says_how_to_check(tmp_path,
                                                                                 rows):
    out = _float_store(tmp_path / "f.zarr", rows)
    (out / "Z" / "c" / "1" / "0").unlink()  # rows 25..49
    Z = zarr.open_array(str(out / "Z"), mode="r")
    # what a plain reader gets: the fill value, no error, in a store that says complete
    assert np.isnan(Z[25:50]).all() and not np.isnan(Z[:25]).any()
    assert zarr.open_group(str(out), mode="r").attrs["complete"] is True
    # what the array tells it: what it holds, the checked readers, the check to make
    assert Z.attrs["long_name"] == "random features"
    assert Z.attrs["dkrp_encoding"] == "float" and Z.attrs["units"] == "1"
    comment = Z.attrs["comment"]
    for words in ("8 features per row", "dkrp.read_features(store)", "dkrp.open_xarray",
                  "reads as the fill value (NaN)", "Z.nchunks_initialized == Z.nchunks",
                  "every element of done is 1"):
        assert words in comment, words
    # and that check finds the hole the done markers cannot show
    assert (Z.nchunks_initialized, Z.nchunks) == (3, 4)
    assert zarr.open_array(str(out / "done"), mode="r")[:].tolist() == [1, 1, 1, 1]
    assert "1 once row chunk i of Z is written" in zarr.open_array(
        str(out / "done"), mode="r").attrs["comment"]
    # dkrp's readers refuse it
    with pytest.raises(ChunkError, match=r"Z/c/1/0, rows 25..49"):
        dkrp.read_features(out)
    with pytest.raises(ChunkError, match=r"Z/c/1/0, rows 25..49"):
        dkrp.open_xarray(out)


def test_a_plain_reader_of_a_bit_store_is_told_it_holds_packed_signs(tmp_path, rows):
    out = _bit_store(tmp_path / "b.zarr", rows)
    Z = zarr.open_array(str(out / "Z"), mode="r")
    assert Z.dtype == np.uint8 and Z.shape == (100, 3)  # uint8 is all a plain reader sees
    assert Z.attrs["long_name"] == "packed sign bits, not features"
    assert Z.attrs["dkrp_encoding"] == "bits"
    # CF flags: the mask of each of a byte's 8 signs, numpy.packbits order
    assert Z.attrs["flag_masks"] == [128, 64, 32, 16, 8, 4, 2, 1]
    assert Z.attrs["flag_meanings"].split() == [f"sign_8j_plus_{i}" for i in range(8)]
    for words in (f"{M} signs per row", "dkrp.read_features(store, unpack=True)",
                  f"dkrp.unpack_bits(Z, {M})", "fill value (0: all signs -1)"):
        assert words in Z.attrs["comment"], words
    spe = open_features(out).projector()
    assert np.array_equal(Z[:], spe.transform_bits(rows[0]))
    (out / "Z" / "c" / "2" / "0").unlink()
    assert not Z[50:75].any()  # a deleted chunk: all zeros, no error
    with pytest.raises(ChunkError, match=r"Z/c/2/0"):
        dkrp.read_features(out, unpack=True)


def test_the_store_attributes_are_the_same_in_every_run(tmp_path, rows):
    # byte-identical stores need attributes without times, hosts or paths
    a = _bit_store(tmp_path / "a.zarr", rows)
    b = _bit_store(tmp_path / "elsewhere" / "b.zarr", rows)
    for name in ("Z/zarr.json", "done/zarr.json", "zarr.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_xarray_open_zarr_sees_the_attributes_and_open_xarray_checks(tmp_path, rows):
    xr = pytest.importorskip("xarray")
    out = _float_store(tmp_path / "f.zarr", rows)
    Z, y = dkrp.read_features(out)
    plain = xr.open_zarr(out)
    assert plain["Z"].attrs["long_name"] == "random features"
    assert "dkrp.open_xarray" in plain["Z"].attrs["comment"]

    ds = dkrp.open_xarray(out)
    assert ds["Z"].dims == ("sample", "component") and ds["y"].dims == ("sample",)
    assert np.array_equal(ds["Z"].values, Z.compute()) and np.array_equal(ds["y"].values, y)
    assert ds.attrs["complete"] is True and ds["Z"].attrs == plain["Z"].attrs

    (out / "Z" / "c" / "3" / "0").unlink()  # after opening: the read raises
    with pytest.raises(ChunkError, match=r"Z/c/3/0"):
        ds["Z"].values  # noqa: B018
    assert np.isnan(xr.open_zarr(out)["Z"].values[75:]).all()  # the plain read: NaN
    with pytest.raises(ChunkError, match=r"Z/c/3/0"):
        dkrp.open_xarray(out)

    group = zarr.open_group(str(out), mode="r+")
    group.update_attributes({"complete": False})
    with pytest.raises(FeatureStoreError, match="incomplete"):
        dkrp.open_xarray(out)


def test_open_xarray_unpacks_a_bit_store_only_when_asked(tmp_path, rows):
    pytest.importorskip("xarray")
    out = _bit_store(tmp_path / "b.zarr", rows)
    with pytest.raises(FeatureStoreError, match="is a bit store"):
        dkrp.open_xarray(out)
    ds = dkrp.open_xarray(out, unpack=True)
    Z, y = dkrp.read_features(out, unpack=True)
    assert ds["Z"].dims == ("sample", "component") and ds["Z"].shape == (100, M)
    assert ds["Z"].dtype == np.float32 and np.array_equal(ds["Z"].values, Z.compute())
    assert np.array_equal(ds["y"].values, y)


def test_stores_written_before_the_attributes_open_with_open_xarray(tmp_path):
    pytest.importorskip("xarray")
    legacy = FIXTURES / "v0_1_0" / "features.zarr"  # dkrp 0.1.0: Z has no attributes
    assert json.loads((legacy / "Z" / "zarr.json").read_text())["attributes"] == {}
    ds = dkrp.open_xarray(legacy)
    assert np.array_equal(ds["Z"].values, open_features(legacy).Z.compute())
    assert ds["Z"].attrs["long_name"] == "random features" and "y" not in ds
    bits = tmp_path / "bits.zarr"
    shutil.copytree(FIXTURES / "encodings" / "bits.zarr", bits)
    ds = dkrp.open_xarray(bits, unpack=True)
    assert np.array_equal(ds["Z"].values, dkrp.read_features(bits, unpack=True)[0].compute())


@pytest.mark.parametrize("labels, fill", [
    (lambda rng: rng.integers(0, 3, 100), np.iinfo(np.int64).min),
    (lambda rng: rng.uniform(0, 1, 100), np.nan),
])
def test_plain_zarr_reads_a_deleted_label_chunk_as_a_value_no_label_has(tmp_path, labels, fill):
    """Labels 0, 1, 2: a deleted chunk of y read as 0s, a class, where Z's reads as NaN."""
    X = np.random.default_rng(5).standard_normal((100, 6))
    y_true = labels(np.random.default_rng(6))
    out = _float_store(tmp_path / "f.zarr", (X, y_true))
    (out / "y" / "c" / "1").unlink()  # rows 25..49
    y = zarr.open_array(str(out / "y"), mode="r")
    assert np.array_equal(y[:25], y_true[:25])
    assert np.array_equal(y[25:50], np.full(25, fill), equal_nan=True)
    assert y.attrs["long_name"] == "labels"
    for words in ("dkrp.read_features(store)", "reads as the fill value",
                  "y.nchunks_initialized == y.nchunks"):
        assert words in y.attrs["comment"], words
    with pytest.raises(ChunkError, match=r"y/c/1"):
        dkrp.read_features(out)
