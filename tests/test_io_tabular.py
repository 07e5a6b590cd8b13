"""Tests for dkrp.io.tabular: CSV and Parquet round trips, from_parquet, column errors."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import zarr

from dkrp.io import Dataset, from_parquet, ingest, open_dataset


def test_csv_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    values = rng.normal(size=(57, 4))
    labels = rng.integers(0, 3, size=57)
    lines = ["Id,a,b,c,d,label"] + [
        f"{i},{','.join(repr(float(v)) for v in row)},{lab}"
        for i, (row, lab) in enumerate(zip(values, labels, strict=True))
    ]
    src = tmp_path / "small.csv"
    src.write_text("\n".join(lines) + "\n")
    group = ingest(
        src, tmp_path / "s.zarr", label_column="label", drop_columns=["Id"], chunk_rows=10
    )
    assert isinstance(group, zarr.Group)
    assert group.attrs["complete"] is True
    assert group.attrs["source"] == str(src.absolute())
    assert group.attrs["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert group.attrs["feature_names"] == ["a", "b", "c", "d"]
    ds = open_dataset(tmp_path / "s.zarr")
    assert isinstance(ds, Dataset) and not ds.is_sparse
    assert ds.X.chunks == ((10,) * 5 + (7,), (4,))
    assert ds.y.chunks == ((10,) * 5 + (7,),)
    np.testing.assert_array_equal(ds.X.compute(), values)
    np.testing.assert_array_equal(ds.y.compute(), labels)
    assert ds.y.dtype == np.int64


def test_covtype_real(shared_file, tmp_path):
    src = shared_file("covtype/kaggle_forest_cover_train.csv")
    ingest(src, tmp_path / "cov.zarr", label_column="Cover_Type", drop_columns=["Id"])
    ds = open_dataset(tmp_path / "cov.zarr")
    assert ds.X.shape == (15120, 54)
    expected = np.loadtxt(src, delimiter=",", skiprows=1, dtype=np.int64)
    np.testing.assert_array_equal(ds.X.compute(), expected[:, 1:55].astype(np.float64))
    np.testing.assert_array_equal(np.bincount(ds.y.compute())[1:], [2160] * 7)


def test_parquet_round_trip_and_reader(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = np.random.default_rng(3)
    cols = {f"f{j}": rng.normal(size=25) for j in range(3)}
    cols["flag"] = rng.integers(0, 2, size=25).astype(bool)
    cols["target"] = rng.integers(0, 4, size=25)
    cols["name"] = [f"row{i}" for i in range(25)]
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table(cols), src, row_group_size=6)
    ingest(src, tmp_path / "p.zarr", label_column="target", drop_columns=["name"], chunk_rows=4)
    ds = open_dataset(tmp_path / "p.zarr")
    expected = np.column_stack([cols["f0"], cols["f1"], cols["f2"], cols["flag"]])
    np.testing.assert_array_equal(ds.X.compute(), expected)
    np.testing.assert_array_equal(ds.y.compute(), cols["target"])

    arr = from_parquet(src, columns=["f2", "f0"], chunk_rows=10)
    assert arr.chunks == ((10, 10, 5), (2,))
    np.testing.assert_array_equal(arr.compute(), np.column_stack([cols["f2"], cols["f0"]]))
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['name'\]"):
        from_parquet(src)


def test_csv_column_errors(tmp_path):
    src = tmp_path / "c.csv"
    src.write_text("Id,a,kind,label\n1,0.5,x,1\n2,1.5,y,0\n")
    available = r"available columns: \['Id', 'a', 'kind', 'label'\]"
    with pytest.raises(ValueError, match=r"label column 'Cover' not found; " + available):
        ingest(src, tmp_path / "c1.zarr", label_column="Cover")
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['kind'\]"):
        ingest(src, tmp_path / "c2.zarr", label_column="label", drop_columns=["Id"])
    with pytest.raises(ValueError, match="sparse=True is only supported for LIBSVM"):
        ingest(src, tmp_path / "c3.zarr", sparse=True)
    ingest(src, tmp_path / "c4.zarr", label_column="label", drop_columns=["Id", "kind"])
    assert open_dataset(tmp_path / "c4.zarr").X.compute().tolist() == [[0.5], [1.5]]
