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
    with pytest.raises(ValueError, match=r"column 'kind': 'x' is not a number"):
        ingest(src, tmp_path / "c2.zarr", label_column="label", drop_columns=["Id"])
    with pytest.raises(ValueError, match="sparse=True is only supported for LIBSVM"):
        ingest(src, tmp_path / "c3.zarr", sparse=True)
    ingest(src, tmp_path / "c4.zarr", label_column="label", drop_columns=["Id", "kind"])
    assert open_dataset(tmp_path / "c4.zarr").X.compute().tolist() == [[0.5], [1.5]]


# -- malformed CSV files are refused, naming the line (issue 10, case 3) ---------------------

_HEADER = "Id,a,b,label\n"


@pytest.mark.parametrize("name, body, match", [
    ("short", "1,0.5,0.25,1\n2,0.1,3\n3,1,2,0\n", r"line 3: 3 fields but the header has 4"),
    ("long", "1,0.5,0.25,1\n2,0.1,3,1,9\n", r"line 3: 5 fields but the header has 4"),
    ("joined", "1,0.5,0.25,12,0.1,3,1\n", r"line 2: 7 fields .*joined"),
    ("last-line-short", "1,0.5,0.25,1\n2,0.1,3", r"line 3: 3 fields"),
])
def test_ragged_csv_rows_are_refused_with_line_and_counts(tmp_path, name, body, match):
    src = tmp_path / f"{name}.csv"
    src.write_text(_HEADER + body)
    with pytest.raises(ValueError, match=match):
        ingest(src, tmp_path / "out.zarr", label_column="label", drop_columns=["Id"])
    assert not (tmp_path / "out.zarr").exists()


def test_short_row_used_to_shift_the_label(tmp_path):
    """The case from the issue: dropping the last column made a short row's label its Id."""
    src = tmp_path / "shift.csv"
    src.write_text("label,a,b,Id\n1,0.5,0.25,10\n0,0.1,20\n")
    with pytest.raises(ValueError, match=r"line 3: 3 fields"):
        ingest(src, tmp_path / "out.zarr", label_column="label", drop_columns=["Id"])


def test_non_numeric_cell_names_line_column_and_value(tmp_path):
    src = tmp_path / "cell.csv"
    src.write_text(_HEADER + "1,0.5,0.25,1\n2,0.1,oops,1\n")
    with pytest.raises(ValueError, match=r"line 3 \(data row 1\), column 'b': 'oops' is not"):
        ingest(src, tmp_path / "out.zarr", label_column="label", drop_columns=["Id"])


@pytest.mark.parametrize("text, match", [("", "is empty"),
                                         (_HEADER, "header but no data rows")])
def test_empty_and_header_only_csv_are_refused(tmp_path, text, match):
    src = tmp_path / "e.csv"
    src.write_text(text)
    with pytest.raises(ValueError, match=match):
        ingest(src, tmp_path / "out.zarr")
    assert not (tmp_path / "out.zarr").exists()


def test_quoted_fields_and_blank_lines_are_fine(tmp_path):
    src = tmp_path / "q.csv"
    src.write_text(_HEADER + '1,"0.5",0.25,1\n\n2,0.1,3,0\r\n')
    ingest(src, tmp_path / "out.zarr", label_column="label", drop_columns=["Id"])
    ds = open_dataset(tmp_path / "out.zarr")
    np.testing.assert_array_equal(ds.X.compute(), [[0.5, 0.25], [0.1, 3.0]])
    assert ds.y.compute().tolist() == [1, 0]
