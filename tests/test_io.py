"""Tests for dkrp.io: ingest round trips, store layout, and the error paths."""

from __future__ import annotations

import bz2
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from dkrp.io import (
    Dataset,
    file_sha256,
    from_npy,
    from_parquet,
    ingest,
    open_dataset,
    read_array,
)

W8A_SHA256 = "821765de2cbea06f54f2f06b1db12c946aec2f95aed74105d12556b11bc34526"


def _shared_data_dir() -> Path | None:
    env = os.environ.get("DKRP_DATA_DIR")
    candidates = [Path(env)] if env else []
    candidates += [
        Path.cwd() / ".." / "shared" / "data",
        Path(__file__).resolve().parents[1] / ".." / "shared" / "data",
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    return None


@pytest.fixture
def shared_file():
    """Return a function giving a real data file, or skipping when it is absent."""

    def get(relative: str) -> Path:
        root = _shared_data_dir()
        if root is None:
            pytest.skip("real data not available: set DKRP_DATA_DIR or provide ../shared/data")
        path = root / relative
        if not path.is_file():
            pytest.skip(f"real data file {relative} not found in {root}")
        return path

    return get


@pytest.fixture
def sparse_libsvm(tmp_path):
    """A 1-based LIBSVM file (with comments and blank lines) and the matrix it holds."""
    rng = np.random.default_rng(0)
    X = sp.random(
        203, 40, density=0.05, format="csr", random_state=rng,
        data_rvs=lambda n: rng.integers(1, 9, n),
    )
    y = rng.choice([-1, 1], size=203)
    path = tmp_path / "data.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False, comment="generated for dkrp tests")
    # blank lines and comment lines inside the body must not become rows
    lines = path.read_bytes().split(b"\n")
    lines.insert(40, b"")
    lines.insert(90, b"   # a comment line")
    path.write_bytes(b"\n".join(lines))
    return path, X, y


def _no_siblings(dest: Path) -> bool:
    """True when neither dest nor any temporary sibling of it exists."""
    siblings = [p for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}.")]
    return not dest.exists() and not siblings


# --------------------------------------------------------------------------- round trips


def test_csv_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    values = rng.normal(size=(57, 4))
    labels = rng.integers(0, 3, size=57)
    lines = ["Id,a,b,c,d,label"] + [
        f"{i},{','.join(repr(float(v)) for v in row)},{lab}"
        for i, (row, lab) in enumerate(zip(values, labels))
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


def test_npy_round_trip_and_reader(tmp_path):
    rng = np.random.default_rng(2)
    values = rng.normal(size=(30, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", values)
    ingest(tmp_path / "x.npy", tmp_path / "x.zarr", chunk_rows=7, dtype="float32")
    ds = open_dataset(tmp_path / "x.zarr")
    assert ds.y is None
    assert ds.X.dtype == np.float32
    assert ds.X.chunks == ((7, 7, 7, 7, 2), (5,))
    np.testing.assert_array_equal(ds.X.compute(), values)

    arr = from_npy(tmp_path / "x.npy", chunk_rows=8)
    assert arr.chunks == ((8, 8, 8, 6), (5,))
    np.testing.assert_array_equal(arr.compute(), values)
    assert arr.name == from_npy(tmp_path / "x.npy", chunk_rows=8).name  # deterministic keys
    assert read_array(tmp_path / "x.npy").shape == (30, 5)
    assert read_array(tmp_path / "x.zarr").chunks == ds.X.chunks


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


@pytest.mark.parametrize("sparse", [True, False])
def test_libsvm_round_trip(sparse_libsvm, tmp_path, sparse):
    path, X, y = sparse_libsvm
    # small parse_bytes: several parsing pieces whose boundaries do not match row blocks
    ingest(path, tmp_path / "l.zarr", sparse=sparse, chunk_rows=50, parse_bytes=700)
    ds = open_dataset(tmp_path / "l.zarr")
    assert ds.is_sparse is sparse
    assert ds.X.chunks == ((50, 50, 50, 50, 3), (40,))
    assert ds.attrs["n_features"] == 40 and ds.attrs["nnz"] == X.nnz
    if sparse:
        assert isinstance(ds.X._meta, sp.csr_matrix)
        block = ds.X.blocks[2].compute()
        assert isinstance(block, sp.csr_matrix)
        np.testing.assert_array_equal(block.toarray(), X[100:150].toarray())
        got = ds.X.compute().toarray()
    else:
        got = ds.X.compute()
    np.testing.assert_array_equal(got, X.toarray())
    np.testing.assert_array_equal(ds.y.compute(), y)


def test_libsvm_bz2_default_sparse(sparse_libsvm, tmp_path):
    path, X, _ = sparse_libsvm
    src = tmp_path / "data.svm.bz2"
    src.write_bytes(bz2.compress(path.read_bytes()))
    group = ingest(src, tmp_path / "b.zarr", n_features=45)
    assert group.attrs["storage"] == "csr"  # density 0.05 < 0.1
    assert group["X"].attrs["format"] == "csr"
    ds = open_dataset(tmp_path / "b.zarr")
    assert ds.X.shape == (203, 45)
    np.testing.assert_array_equal(ds.X.compute().toarray()[:, :40], X.toarray())
    assert not (tmp_path / "b.zarr" / "_decompressed_source.libsvm").exists()


def test_w8a_real(shared_file, tmp_path):
    src = shared_file("w8a/w8a.bz2")
    group = ingest(src, tmp_path / "w8a.zarr", n_features=300)
    assert group.attrs["source_sha256"] == W8A_SHA256
    ds = open_dataset(tmp_path / "w8a.zarr")
    assert ds.is_sparse
    assert ds.X.shape == (49749, 300)
    X = ds.X.compute()
    assert X.nnz == 579586 and ds.attrs["nnz"] == 579586
    X_ref, y_ref = load_svmlight_file(str(src), n_features=300)
    assert abs(X - X_ref).max() == 0
    np.testing.assert_array_equal(ds.y.compute(), y_ref)


def test_file_sha256(tmp_path):
    path = tmp_path / "f.bin"
    payload = np.random.default_rng(4).bytes(100_003)
    path.write_bytes(payload)
    assert file_sha256(path, chunk_size=4096) == hashlib.sha256(payload).hexdigest()


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "bad_line, n_features, match",
    [
        (b"1 3:1 99:2", 40, r"line 151: feature index 99 is out of range for n_features=40"),
        (b"1 3:1 x:2", None, r"line 151: malformed LIBSVM line"),
        (b"1 3:abc", None, r"line 151: malformed LIBSVM line"),
        (b"one 3:1", None, r"line 151: malformed LIBSVM line"),
        (b"1 5:1 3:1", None, r"line 151: malformed LIBSVM line.*sorted"),
        (b"1 3:nan", None, r"line 151: Input X contains NaN"),
    ],
)
def test_libsvm_bad_line_names_file_and_line(tmp_path, bad_line, n_features, match):
    lines = [f"{(-1) ** i} {1 + i % 30}:1 {31 + i % 9}:0.5".encode() for i in range(300)]
    lines[150] = bad_line  # line 151 (1-based)
    src = tmp_path / "bad.libsvm"
    src.write_bytes(b"\n".join(lines) + b"\n")
    dest = tmp_path / "bad.zarr"
    with pytest.raises(ValueError, match=match) as info:
        ingest(src, dest, n_features=n_features, parse_bytes=512)
    assert str(src) in str(info.value)
    assert _no_siblings(dest)


def test_error_midway_leaves_no_dest(tmp_path):
    # the last row is bad; earlier row blocks have been written by then (chunk_rows=10)
    rows = [f"{i},{i * 0.5}" for i in range(95)] + ["95,nan"]
    src = tmp_path / "late.csv"
    src.write_text("a,b\n" + "\n".join(rows) + "\n")
    dest = tmp_path / "late.zarr"
    with pytest.raises(ValueError, match=r"Input X contains NaN\. First at data row 95 \(line 97"):
        ingest(src, dest, chunk_rows=10)
    assert _no_siblings(dest)


def test_missing_source_and_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ingest(tmp_path / "nope.csv", tmp_path / "d.zarr")
    with pytest.raises(FileNotFoundError, match="No dataset store at"):
        open_dataset(tmp_path / "nothing.zarr")


@pytest.fixture
def small_store(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(40.0).reshape(10, 4))
    dest = tmp_path / "x.zarr"
    ingest(tmp_path / "x.npy", dest, chunk_rows=3)
    return dest


def test_corrupt_store_refused(small_store):
    (small_store / "X" / "zarr.json").unlink()
    with pytest.raises(ValueError, match=r"x\.zarr is corrupt: member 'X' is missing"):
        open_dataset(small_store)


def test_missing_chunk_refused(small_store):
    chunk = next(p for p in (small_store / "X").rglob("*") if p.is_file() and p.name != "zarr.json")
    chunk.unlink()
    with pytest.raises(ValueError, match=r"corrupt: array 'X' has 3 of 4 chunks"):
        open_dataset(small_store)


def test_not_a_dataset_refused(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="is not a dkrp dataset store"):
        open_dataset(tmp_path / "plain")
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w")
    with pytest.raises(ValueError, match="dkrp_format is None"):
        open_dataset(tmp_path / "other.zarr")


def test_incomplete_store_refused(small_store):
    zarr.open_group(str(small_store), mode="r+").attrs["complete"] = False
    with pytest.raises(ValueError, match=r"is incomplete.*overwrite=True.*allow_incomplete=True"):
        open_dataset(small_store)
    assert open_dataset(small_store, allow_incomplete=True).X.shape == (10, 4)


def test_existing_dest_refused_then_overwritten(small_store, tmp_path):
    with pytest.raises(FileExistsError, match=r"overwrite=True \(--overwrite"):
        ingest(tmp_path / "x.npy", small_store)
    np.save(tmp_path / "y.npy", np.ones((2, 2)))
    ingest(tmp_path / "y.npy", small_store, overwrite=True)
    assert open_dataset(small_store).X.shape == (2, 2)
    (tmp_path / "precious").mkdir()
    with pytest.raises(FileExistsError, match="not a dkrp dataset store"):
        ingest(tmp_path / "y.npy", tmp_path / "precious", overwrite=True)
    assert (tmp_path / "precious").is_dir()


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


def test_csr_dask_array_stays_lazy_and_sparse(sparse_libsvm, tmp_path):
    path, X, _ = sparse_libsvm
    ingest(path, tmp_path / "l.zarr", sparse=True, chunk_rows=64)
    ds = open_dataset(tmp_path / "l.zarr")
    row_sums = ds.X.map_blocks(
        lambda b: np.asarray(b.sum(axis=1)),
        chunks=(ds.X.chunks[0], (1,)),
        dtype=float,
        meta=np.empty((0, 0)),
    )
    assert isinstance(row_sums, da.Array)
    np.testing.assert_allclose(row_sums.compute().ravel(), np.asarray(X.sum(axis=1)).ravel())


def test_sigkilled_ingest_leaves_no_dest(tmp_path):
    # Kill point is data-driven: SIGKILL once a few X chunks exist in the temporary sibling.
    rng = np.random.default_rng(5)
    src = tmp_path / "big.csv"
    np.savetxt(src, rng.normal(size=(40_000, 3)), delimiter=",", header="a,b,c", comments="")
    dest = tmp_path / "big.zarr"
    code = (
        "import sys; from dkrp.io import ingest; "
        "ingest(sys.argv[1], sys.argv[2], chunk_rows=100)"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-c", code, str(src), str(dest)], env=env)
    try:
        deadline = time.monotonic() + 60
        chunks = []
        while time.monotonic() < deadline and proc.poll() is None:
            chunks = list(tmp_path.glob(".big.zarr.ingest-*/X/c/*/*"))
            if len(chunks) >= 5:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "ingest finished before it could be killed"
        assert len(chunks) >= 5
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not dest.exists()
    (leftover,) = tmp_path.glob(".big.zarr.ingest-*")
    with pytest.raises(ValueError, match="is incomplete"):
        open_dataset(leftover)


def test_idx_ingest_of_real_mnist_test_images(tmp_path):
    from conftest import require_data

    images = require_data("mnist", "t10k-images-idx3-ubyte.gz")
    labels = require_data("mnist", "t10k-labels-idx1-ubyte.gz")
    from dkrp.io import ingest, open_dataset, read_idx

    ingest(images, tmp_path / "mnist.zarr", labels=labels, dtype="float32", chunk_rows=2500)
    ds = open_dataset(tmp_path / "mnist.zarr")
    raw = read_idx(images).reshape(10000, 784)
    assert ds.X.shape == (10000, 784) and ds.X.chunks[0] == (2500,) * 4
    np.testing.assert_array_equal(ds.X.compute(), raw.astype(np.float32))
    np.testing.assert_array_equal(ds.y.compute(), read_idx(labels))
    assert ds.attrs["source_format"] == "idx"


def test_idx_errors_name_the_file(tmp_path):
    import gzip

    from dkrp.io import ingest, read_idx

    bad = tmp_path / "bad-idx3-ubyte.gz"
    with gzip.open(bad, "wb") as f:
        f.write(b"\x00\x00\x08\x03" + (5).to_bytes(4, "big") + (2).to_bytes(4, "big") * 2 + b"\x01" * 7)
    with pytest.raises(ValueError, match="bad-idx3-ubyte.gz: IDX header says shape \\(5, 2, 2\\)"):
        read_idx(bad)
    with pytest.raises(ValueError, match="bad-idx3-ubyte.gz"):
        ingest(bad, tmp_path / "out.zarr")
    assert not (tmp_path / "out.zarr").exists()
