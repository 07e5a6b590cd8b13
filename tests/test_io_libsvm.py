"""Tests for dkrp.io.libsvm: LIBSVM round trips (dense and CSR), compression, bad lines, and
the index base (0- or 1-based) on the command line too."""

from __future__ import annotations

import bz2

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner
from conftest import no_siblings
from sklearn.datasets import load_svmlight_file

from dkrp.cli import main
from dkrp.io import ingest, open_dataset

W8A_SHA256 = "821765de2cbea06f54f2f06b1db12c946aec2f95aed74105d12556b11bc34526"


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
    assert no_siblings(dest)


# -- the index base: a stray `0:` must not shift every column (issue 29, case 4) --------------


def _one_based_with_stray_zero(tmp_path, n=200, line=57):
    """A 1-based LIBSVM file of ``n`` rows whose line ``line`` alone holds index 0."""
    lines = [f"{(-1) ** i} {1 + i % 30}:1 {31 + i % 9}:0.5".encode() for i in range(n)]
    lines[line - 1] = b"1 0:2 3:1"
    src = tmp_path / "stray.svm"
    src.write_bytes(b"\n".join(lines) + b"\n")
    return src


def test_stray_index_0_in_a_one_based_file_is_refused_naming_the_line(tmp_path):
    src = _one_based_with_stray_zero(tmp_path)
    dest = tmp_path / "stray.zarr"
    # small pieces: the line is found in a piece of its own, numbered from the file's start
    with pytest.raises(ValueError, match=r"line 57: feature index 0 \(on 1 of 200 rows") as info:
        ingest(src, dest, parse_bytes=512)
    message = str(info.value)
    assert str(src) in message and "'1 0:2 3:1'" in message
    assert "Pass zero_based=True if indices start at 0" in message
    assert "or zero_based=False if they start at 1" in message and "--" not in message
    assert no_siblings(dest)


def test_the_index_base_asked_for_is_read_so(tmp_path):
    src = _one_based_with_stray_zero(tmp_path)
    with pytest.raises(ValueError, match=r"line 57: feature index 0 in a 1-based file \(pass "
                                         r"zero_based=True if indices start at 0\)"):
        ingest(src, tmp_path / "one.zarr", zero_based=False, parse_bytes=512)
    group = ingest(src, tmp_path / "zero.zarr", zero_based=True, parse_bytes=512)
    assert group.attrs["zero_based"] is True and group.attrs["n_features"] == 40
    X_ref, _ = load_svmlight_file(str(src), zero_based=True, n_features=40)
    np.testing.assert_array_equal(open_dataset(tmp_path / "zero.zarr").X.compute().toarray(),
                                  X_ref.toarray())


@pytest.mark.parametrize(
    "rows, zero_based",
    [
        ([b"1 0:1 2:1", b"1 1:1", b"1 0:3", b"1 4:1"], True),  # index 0 on half the rows
        ([b"1 0:1 2:1", b"1 1:1", b"1 0:3", b"1", b"1", b"1 4:1"], True),  # rows without features
        ([b"1 0:1 2:1", b"1 1:1", b"1 0:3", b"1 4:1", b"1 2:2"], None),  # 2 of 5: unsure
        ([b"1 1:1 2:1", b"1 3:1"], False),  # no index 0: LIBSVM's 1-based
    ],
    ids=["half", "featureless-rows-not-counted", "under-half", "no-zero"],
)
def test_auto_index_base_needs_index_0_on_half_the_rows(tmp_path, rows, zero_based):
    src = tmp_path / "base.svm"
    src.write_bytes(b"\n".join(rows) + b"\n")
    if zero_based is None:
        with pytest.raises(ValueError, match=r"line 1: feature index 0 \(on 2 of 5 rows"):
            ingest(src, tmp_path / "b.zarr")
        return
    group = ingest(src, tmp_path / "b.zarr")
    assert group.attrs["zero_based"] is zero_based
    X_ref, _ = load_svmlight_file(str(src), zero_based=zero_based)
    np.testing.assert_array_equal(open_dataset(tmp_path / "b.zarr").X.compute(), X_ref.toarray())


def test_cli_names_the_index_base_flags(tmp_path):
    src = _one_based_with_stray_zero(tmp_path)
    dest = tmp_path / "stray.zarr"
    r = CliRunner().invoke(main, ["ingest", str(src), str(dest)])
    assert r.exit_code == 1, r.output
    assert f"{src}: line 57: feature index 0" in r.output
    assert "Pass --zero-based if indices start at 0, or --one-based if" in r.output
    assert "zero_based" not in r.output and not dest.exists()
    r = CliRunner().invoke(main, ["ingest", str(src), str(dest), "--one-based"])
    assert r.exit_code == 1 and "line 57" in r.output
    assert "(pass --zero-based if indices start at 0)" in r.output, r.output
    r = CliRunner().invoke(main, ["ingest", str(src), str(dest), "--zero-based"])
    assert r.exit_code == 0, r.output
    assert "ingested 200 rows x 40 features (csr, 0-based indices)" in r.output
    assert open_dataset(dest).attrs["zero_based"] is True
