"""``dkrp export`` / :func:`dkrp.feature_store.export.export_features` (issue 28, item 6).

What a user handing a feature store to another tool relies on: each format holds the
store's features and labels exactly, files are named as documented, an existing file is
replaced only when asked, and a failed export leaves nothing half written (nor an old
file damaged). Real Zarr stores on disk, written on dask's local scheduler.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from sklearn.datasets import load_svmlight_file

import dkrp
from dkrp.errors import ChunkError
from dkrp.feature_store import open_features
from dkrp.feature_store.export import export_features, labels_path

N, D, CHUNK, K = 90, 4, 25, 10  # 4 chunks, the last one short


def _rows():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, D))
    X[rng.random((N, D)) < 0.5] = 0.0  # features with exact zeros, and a row of zeros
    X[7] = 0.0
    return X, rng.integers(0, 3, N)


def _store(path, *, labels=None, dtype=None, bits=False):
    X, _ = _rows()
    if bits:
        est = dkrp.SignProductEmbedding(n_components=20, random_state=2)
    else:
        est = dkrp.ExplicitPolynomialProjection(degree=2, n_components=K, random_state=0)
    dkrp.featurize_to_store(da.from_array(X, chunks=(CHUNK, D)), path, est, labels=labels,
                            dtype=dtype, bits=bits, progress=False)
    return path


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """float64 features with integer labels, float32 features without labels, float64
    features with float labels (a regression target of tiny values), integer labels
    beyond float64's 53 bits (identifiers), and a bit store with labels."""
    tmp = tmp_path_factory.mktemp("stores")
    _, y = _rows()
    out = {
        "labelled": _store(tmp / "labelled.zarr", labels=y),
        "float32": _store(tmp / "float32.zarr", dtype="float32"),
        "regression": _store(tmp / "regression.zarr", labels=(y * 0.1 + 1 / 3) * 1e-20),
        "ids": _store(tmp / "ids.zarr", labels=2**62 + 3 + y),
        "bits": _store(tmp / "bits.zarr", labels=y, bits=True),
    }
    return {name: (path, *_read(path)) for name, path in out.items()}


def _read(path):
    fs = open_features(path)
    return fs.Z.compute(), None if fs.y is None else fs.y.compute()


def _open_files_under(folder):
    """The files under ``folder`` this process holds open or mapped (Linux), else []."""
    if not Path("/proc/self/maps").exists():
        return []
    targets = [os.readlink(fd) for fd in Path("/proc/self/fd").iterdir() if fd.exists()]
    maps = [line.split(maxsplit=5)[-1] for line in Path("/proc/self/maps").read_text().splitlines()]
    return sorted({t for t in targets + maps if t.startswith(str(folder))})


def _files(folder):
    return sorted(p.name for p in Path(folder).iterdir())


def test_labels_file_of_an_npy_export_is_named_beside_it():
    assert labels_path("out/train.npy") == Path("out/train.y.npy")
    assert labels_path("out/features") == Path("out/features.y.npy")
    assert labels_path("train.npy.bak") == Path("train.npy.bak.y.npy")


def test_npy_holds_the_store_bytes_and_the_labels_beside_it(stores, tmp_path):
    path, Z, y = stores["labelled"]
    result = export_features(path, "npy", tmp_path / "train.npy")
    assert result == {"path": str(tmp_path / "train.npy"),
                      "labels_path": str(tmp_path / "train.y.npy"), "format": "npy",
                      "rows": N, "n_components": K, "encoding": "float", "has_labels": True}
    assert _files(tmp_path) == ["train.npy", "train.y.npy"]  # no temporary file left
    got = np.load(tmp_path / "train.npy")
    assert got.dtype == Z.dtype and got.shape == Z.shape and got.tobytes() == Z.tobytes()
    labels = np.load(tmp_path / "train.y.npy")
    assert labels.dtype == y.dtype and np.array_equal(labels, y)


def test_npy_of_a_store_without_labels_keeps_its_dtype_and_writes_no_labels(stores,
                                                                             tmp_path):
    path, Z, _ = stores["float32"]
    result = export_features(path, "npy", tmp_path / "f.npy")
    assert result["labels_path"] is None and result["has_labels"] is False
    assert _files(tmp_path) == ["f.npy"]
    got = np.load(tmp_path / "f.npy")
    assert got.dtype == np.float32 and got.tobytes() == Z.tobytes()


def test_bit_store_exports_its_packed_bytes_to_npy_only(stores, tmp_path):
    path, Z, y = stores["bits"]
    result = export_features(path, "npy", tmp_path / "b.npy")
    assert (result["encoding"], result["n_components"], result["rows"]) == ("bits", 20, N)
    assert np.load(tmp_path / "b.npy").tobytes() == Z.tobytes()
    assert np.array_equal(np.load(tmp_path / "b.y.npy"), y)
    for fmt in ("parquet", "libsvm"):
        with pytest.raises(ValueError) as err:
            export_features(path, fmt, tmp_path / f"b.{fmt}")
        assert str(err.value) == (
            f"{path} is a bit store (packed sign bits, not features): it exports to npy "
            "only (to='npy': the packed uint8 bytes, decoded by dkrp.unpack_bits).")
    assert _files(tmp_path) == ["b.npy", "b.y.npy"]


def test_parquet_has_a_column_per_feature_the_labels_and_a_row_group_per_chunk(stores,
                                                                               tmp_path):
    path, Z, y = stores["labelled"]
    result = export_features(path, "parquet", tmp_path / "f.parquet")
    assert result["format"] == "parquet" and result["labels_path"] is None
    assert _files(tmp_path) == ["f.parquet"]
    frame = pd.read_parquet(tmp_path / "f.parquet")
    assert list(frame.columns) == [f"z{j}" for j in range(K)] + ["y"]
    assert frame.drop(columns="y").to_numpy().tobytes() == Z.tobytes()
    assert frame["y"].dtype == y.dtype and np.array_equal(frame["y"].to_numpy(), y)
    assert pq.ParquetFile(tmp_path / "f.parquet").num_row_groups == 4


def test_parquet_without_labels_keeps_the_store_dtype(stores, tmp_path):
    path, Z, _ = stores["float32"]
    export_features(path, "parquet", tmp_path / "f.parquet")
    frame = pd.read_parquet(tmp_path / "f.parquet")
    assert list(frame.columns) == [f"z{j}" for j in range(K)]
    assert (frame.dtypes == np.float32).all()
    assert frame.to_numpy().tobytes() == Z.tobytes()


def test_libsvm_lines_have_one_based_indices_no_zeros_and_exact_values(stores, tmp_path):
    path, Z, y = stores["labelled"]
    result = export_features(path, "libsvm", tmp_path / "f.svm")
    assert result["format"] == "libsvm" and _files(tmp_path) == ["f.svm"]
    lines = (tmp_path / "f.svm").read_text(encoding="ascii").splitlines(keepends=True)
    assert len(lines) == N and all(line.endswith("\n") for line in lines)
    assert lines[7] == f"{y[7]}\n"  # a row of zeros: the label alone, no trailing space
    for line, row, label in zip(lines, Z, y, strict=True):
        head, *pairs = line.split()
        assert head == str(label)  # integer labels as integers
        indices = [int(p.split(":")[0]) for p in pairs]
        assert indices == [j + 1 for j in np.flatnonzero(row)]  # 1-based, zeros left out
    Zs, ys = load_svmlight_file(str(tmp_path / "f.svm"), zero_based=False, n_features=K)
    assert np.array_equal(Zs.toarray(), Z) and np.array_equal(ys, y)  # 17 digits: exact
    assert (Z == 0).any() and (Z != 0).sum() < Z.size


def test_libsvm_keeps_float_labels_exactly_and_gives_unlabelled_rows_label_0(stores,
                                                                          tmp_path):
    path, Z, y = stores["regression"]
    export_features(path, "libsvm", tmp_path / "r.svm")
    Zs, ys = load_svmlight_file(str(tmp_path / "r.svm"), zero_based=False, n_features=K)
    assert np.array_equal(ys, y) and np.array_equal(Zs.toarray(), Z)
    assert (tmp_path / "r.svm").read_text().splitlines()[7] == "%.17g" % y[7]
    assert "e-21" in "%.17g" % y[7]  # the exponent as C's printf and LIBSVM write it

    path, Z, _ = stores["float32"]
    export_features(path, "libsvm", tmp_path / "u.svm")
    lines = (tmp_path / "u.svm").read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["0"] * N and lines[7] == "0"
    Zs, ys = load_svmlight_file(str(tmp_path / "u.svm"), zero_based=False, n_features=K)
    assert np.array_equal(Zs.toarray().astype(np.float32), Z)  # float32 values, exactly
    assert not ys.any()


def test_integer_labels_beyond_float_precision_are_written_exactly(stores, tmp_path):
    path, _, y = stores["ids"]
    assert y.dtype == np.int64 and y.min() > 2**53
    export_features(path, "libsvm", tmp_path / "ids.svm")
    heads = [line.split()[0] for line in (tmp_path / "ids.svm").read_text().splitlines()]
    assert heads == [str(label) for label in y.tolist()]


def test_parquet_without_pyarrow_says_what_to_install(stores, tmp_path, monkeypatch):
    from dkrp.errors import MissingDependencyError

    # a user's environment without the parquet extra: pyarrow cannot be imported
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(MissingDependencyError) as err:
        export_features(stores["labelled"][0], "parquet", tmp_path / "f.parquet")
    assert str(err.value) == ("Exporting to Parquet needs pyarrow: pip install "
                              "'dkrp[parquet]'.")
    assert isinstance(err.value.__cause__, ImportError) and _files(tmp_path) == []


def test_an_unknown_format_is_refused_naming_the_formats(stores, tmp_path):
    with pytest.raises(ValueError) as err:
        export_features(stores["labelled"][0], "csv", tmp_path / "f.csv")
    assert str(err.value) == "Unknown export format 'csv'; choose one of npy, parquet, libsvm."
    assert _files(tmp_path) == []


def test_an_existing_file_is_replaced_only_with_overwrite(stores, tmp_path):
    path, Z, y = stores["labelled"]
    out = tmp_path / "f.npy"
    out.write_bytes(b"mine")
    with pytest.raises(FileExistsError) as err:
        export_features(path, "npy", out)
    assert str(err.value) == f"{out} exists; pass overwrite=True to replace it."
    assert out.read_bytes() == b"mine" and _files(tmp_path) == ["f.npy"]
    # the labels file alone is in the way too, and is named
    out.unlink()
    (tmp_path / "f.y.npy").write_bytes(b"my labels")
    with pytest.raises(FileExistsError, match=r"f\.y\.npy exists; pass overwrite=True"):
        export_features(path, "npy", out)
    assert _files(tmp_path) == ["f.y.npy"]
    out.write_bytes(b"mine")
    export_features(path, "npy", out, overwrite=True)
    assert np.load(out).tobytes() == Z.tobytes()
    assert np.array_equal(np.load(tmp_path / "f.y.npy"), y)
    # a labels-like file beside another format is not in its way
    (tmp_path / "f.parquet.y.npy").write_bytes(b"not mine to touch")
    export_features(path, "parquet", tmp_path / "f.parquet")
    assert (tmp_path / "f.parquet.y.npy").read_bytes() == b"not mine to touch"


def test_a_directory_in_the_way_is_refused_even_with_overwrite(stores, tmp_path):
    path = stores["labelled"][0]
    (tmp_path / "f.npy").mkdir()
    with pytest.raises(FileExistsError) as err:
        export_features(path, "npy", tmp_path / "f.npy", overwrite=True)
    assert str(err.value) == f"{tmp_path / 'f.npy'} is a directory; export writes a file."
    (tmp_path / "g.y.npy").mkdir()
    with pytest.raises(FileExistsError, match=r"g\.y\.npy is a directory"):
        export_features(path, "npy", tmp_path / "g.npy", overwrite=True)
    assert _files(tmp_path) == ["f.npy", "g.y.npy"]
    assert not any((tmp_path / "f.npy").iterdir())


def test_the_output_path_may_be_relative_or_under_home_or_in_new_folders(stores, tmp_path,
                                                                        monkeypatch):
    path, Z, _ = stores["float32"]
    monkeypatch.chdir(tmp_path)
    result = export_features(path, "npy", "rel.npy")
    assert result["path"] == str(tmp_path / "rel.npy")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    result = export_features(path, "npy", "~/exports/2026/f.npy")
    assert result["path"] == str(tmp_path / "home" / "exports" / "2026" / "f.npy")
    assert np.load(result["path"]).tobytes() == Z.tobytes()
    export_features(path, "npy", "~/exports/2026/g.npy")  # into a folder that exists
    assert _files(tmp_path / "home" / "exports" / "2026") == ["f.npy", "g.npy"]


@pytest.mark.parametrize("fmt", ["npy", "parquet", "libsvm"])
def test_a_failed_export_leaves_no_file_and_an_old_one_intact(stores, tmp_path, fmt):
    import shutil

    store = tmp_path / "s.zarr"
    shutil.copytree(stores["labelled"][0], store)
    chunk = store / "Z" / "c" / "2" / "0"  # rows 50..74, damaged on disk: found while exporting
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    out = tmp_path / "out" / f"f.{fmt}"
    with pytest.raises(ChunkError, match=r"Z/c/2/0"):
        export_features(store, fmt, out)
    assert _files(out.parent) == []
    # nor a deleted temporary file held open (its disk space in use) while the error is
    # kept, as a notebook keeps the last one
    assert _open_files_under(out.parent) == []
    out.write_bytes(b"old")
    if fmt == "npy":
        (out.parent / "f.y.npy").write_bytes(b"old labels")
    with pytest.raises(ChunkError):
        export_features(store, fmt, out, overwrite=True)
    assert out.read_bytes() == b"old"
    assert _files(out.parent) == (["f.npy", "f.y.npy"] if fmt == "npy" else [f"f.{fmt}"])
    if fmt == "npy":
        assert (out.parent / "f.y.npy").read_bytes() == b"old labels"


@pytest.mark.parametrize("fmt", ["npy", "parquet", "libsvm"])
def test_an_unfinished_store_is_refused_and_nothing_is_written(tmp_path, fmt):
    # a featurize that stopped at a bad row leaves chunks unwritten, which Zarr would read
    # as NaN: an export of it would hand another tool rows that were never computed
    from dkrp.errors import FeatureStoreError

    X, y = _rows()
    X[60, 1] = np.nan  # partition 2 (rows 50..74) fails
    est = dkrp.ExplicitPolynomialProjection(degree=2, n_components=K, random_state=0)
    with pytest.raises(ValueError, match="row 60"):
        dkrp.featurize_to_store(da.from_array(X, chunks=(CHUNK, D)), tmp_path / "s.zarr", est,
                                labels=y, progress=False)
    out = tmp_path / "out" / f"f.{fmt}"
    with pytest.raises(FeatureStoreError,
                       match=r"is incomplete: its run did not finish \(\d of 4 chunks"):
        export_features(tmp_path / "s.zarr", fmt, out)
    assert not out.parent.exists() or _files(out.parent) == []


def test_an_empty_store_of_dkrp_0_1_0_exports_its_columns_and_no_rows(tmp_path):
    # dkrp 0.1.0 featurized an input without rows into a "complete" store of 0 rows (0.2.0
    # refuses such input): its export is an empty file of the right columns, not an error
    import shutil

    import zarr

    store = tmp_path / "empty.zarr"
    shutil.copytree(Path(__file__).parent / "fixtures" / "v0_1_0" / "features.zarr", store)
    group = zarr.open_group(str(store), mode="r+")
    for name in ("Z", "done"):
        group[name].resize((0,) + group[name].shape[1:])
    attrs = dict(group.attrs)
    attrs.update(n_samples=0, n_chunks=0, input={**attrs["input"], "shape": [0, 6]})
    group.attrs.update(attrs)
    for fmt in ("npy", "parquet", "libsvm"):
        result = export_features(store, fmt, tmp_path / f"e.{fmt}")
        assert (result["rows"], result["n_components"], result["has_labels"]) == (0, 12, False)
    assert np.load(tmp_path / "e.npy").shape == (0, 12)
    frame = pd.read_parquet(tmp_path / "e.parquet")
    assert frame.shape == (0, 12) and list(frame.columns) == [f"z{j}" for j in range(12)]
    assert (frame.dtypes == np.float64).all()
    assert (tmp_path / "e.libsvm").read_bytes() == b""
