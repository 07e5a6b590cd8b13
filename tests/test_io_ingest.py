"""Tests for dkrp.io.ingest: format choice, the atomic publish, and ingest's error paths."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask
import numpy as np
import pytest
from conftest import no_siblings

from dkrp._store import publish_atomically
from dkrp.io import file_sha256, ingest, open_dataset
from dkrp.io.ingestion import _FORMATS, _resolve_format


def test_file_sha256(tmp_path):
    path = tmp_path / "f.bin"
    payload = np.random.default_rng(4).bytes(100_003)
    path.write_bytes(payload)
    assert file_sha256(path, chunk_size=4096) == hashlib.sha256(payload).hexdigest()


def test_error_midway_leaves_no_dest(tmp_path):
    # the last row is bad; earlier row blocks have been written by then (chunk_rows=10)
    rows = [f"{i},{i * 0.5}" for i in range(95)] + ["95,nan"]
    src = tmp_path / "late.csv"
    src.write_text("a,b\n" + "\n".join(rows) + "\n")
    dest = tmp_path / "late.zarr"
    with pytest.raises(ValueError, match=r"Input X contains NaN\. First at data row 95 \(line 97"):
        ingest(src, dest, chunk_rows=10)
    assert no_siblings(dest)


def test_error_early_in_a_large_file_leaves_no_dest_once_its_started_blocks_end(tmp_path):
    # a bad row in an early block while other threads copy later blocks into the hidden
    # build: the error is raised, and the build deleted, only once those have ended
    # (dask alone raised first: 4 of 10 such ingests left the build behind, written
    # into after its deletion). Several tries, as one catches that about half the time
    src = tmp_path / "big.npy"
    values = np.random.default_rng(5).standard_normal((100_000, 20))
    with dask.config.set(scheduler="threads", num_workers=4):
        for row in (1_001, 2_502, 3_003, 4_504, 5_005):
            bad = values.copy()
            bad[row, 3] = np.nan
            np.save(src, bad)
            dest = tmp_path / f"big-{row}.zarr"
            with pytest.raises(ValueError, match=f"NaN.*row {row}"):
                ingest(src, dest, chunk_rows=500)
            time.sleep(0.2)
            assert no_siblings(dest), row


def test_missing_source_and_store(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ingest(tmp_path / "nope.csv", tmp_path / "d.zarr")
    with pytest.raises(FileNotFoundError, match="No dataset store at"):
        open_dataset(tmp_path / "nothing.zarr")


def test_existing_dest_refused_then_overwritten(small_store, tmp_path):
    with pytest.raises(FileExistsError, match=r"pass overwrite=True to replace it$"):
        ingest(tmp_path / "x.npy", small_store)
    np.save(tmp_path / "y.npy", np.ones((2, 2)))
    ingest(tmp_path / "y.npy", small_store, overwrite=True)
    assert open_dataset(small_store).X.shape == (2, 2)
    (tmp_path / "precious").mkdir()
    with pytest.raises(FileExistsError, match="not a dkrp dataset store"):
        ingest(tmp_path / "y.npy", tmp_path / "precious", overwrite=True)
    assert (tmp_path / "precious").is_dir()


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


@pytest.mark.parametrize(
    "name, first_line, expected",
    [
        ("a.svm", b"", "libsvm"),
        ("a.t.bz2", b"", "libsvm"),
        ("a.CSV", b"", "csv"),
        ("a.npy", b"", "npy"),
        ("a.pq", b"", "parquet"),
        ("train-images-idx3-ubyte.gz", b"", "idx"),
        ("a.idx", b"", "idx"),
        ("w8a", b"-1 3:1 11:1\n", "libsvm"),
        ("table", b"a,b\n1,2\n", "csv"),
    ],
)
def test_format_from_name_then_first_line(tmp_path, name, first_line, expected):
    path = tmp_path / name
    path.write_bytes(first_line)
    assert _resolve_format(path, None) == expected
    assert _resolve_format(path, "SVMLIGHT") == "libsvm"


def test_format_refusals(tmp_path):
    (tmp_path / "x.npy.gz").write_bytes(b"")
    with pytest.raises(ValueError, match="compressed npy files are not supported"):
        _resolve_format(tmp_path / "x.npy.gz", None)
    (tmp_path / "blob").write_bytes(b"no idea\n")
    with pytest.raises(ValueError, match=r"Cannot infer the format .*pass fmt= one of"):
        _resolve_format(tmp_path / "blob", None)
    with pytest.raises(ValueError, match="fmt must be one of"):
        _resolve_format(tmp_path / "blob", "hdf5")
    assert _FORMATS == ("libsvm", "csv", "npy", "parquet", "idx")


def test_atomic_publish_swaps_in_or_leaves_nothing(tmp_path):
    dest = tmp_path / "d"
    with pytest.raises(KeyboardInterrupt):
        with publish_atomically(dest, "ingest") as tmp:
            tmp.mkdir()
            (tmp / "half").write_text("written")
            raise KeyboardInterrupt
    assert no_siblings(dest)
    for text in ("first", "second"):
        with publish_atomically(dest, "ingest") as tmp:
            tmp.mkdir()
            (tmp / "f").write_text(text)
        assert (dest / "f").read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


# -- inputs without rows are refused, as a header-only CSV is (issue 29, case 8) -------------


def _write_empty(path: Path) -> None:
    """A file of ``path``'s format that holds no rows."""
    name = path.name
    if name.endswith(".npy"):
        np.save(path, np.zeros((0, 3)))
    elif name == "empty.svm":
        path.write_bytes(b"")
    elif name.endswith(".svm"):
        path.write_bytes(b"# a comment\n\n   \n# another\n")
    elif name.endswith(".parquet"):
        pa = pytest.importorskip("pyarrow")
        pq = pytest.importorskip("pyarrow.parquet")
        pq.write_table(pa.table({"a": np.zeros(0), "b": np.zeros(0)}), path)
    else:  # IDX: 0 images of 2 x 2 bytes
        header = bytes([0, 0, 0x08, 3]) + b"".join(d.to_bytes(4, "big") for d in (0, 2, 2))
        path.write_bytes(header)


@pytest.mark.parametrize("name, match", [
    ("z.npy", r"z\.npy holds no rows \(shape \(0, 3\)\): nothing to ingest"),
    ("empty.svm", r"empty\.svm is empty: nothing to ingest"),
    ("comments.svm", r"comments\.svm has no data lines, only blank or comment lines"),
    ("z.parquet", r"z\.parquet holds no rows: nothing to ingest"),
    ("z-idx3-ubyte", r"z-idx3-ubyte holds no rows \(shape \(0, 2, 2\)\): nothing to ingest"),
])
def test_inputs_without_rows_are_refused(tmp_path, name, match):
    src = tmp_path / name
    _write_empty(src)
    dest = tmp_path / "out.zarr"
    with pytest.raises(ValueError, match=match):
        ingest(src, dest)
    assert no_siblings(dest)


def test_cli_refuses_a_0_row_npy_in_one_line(tmp_path):
    from click.testing import CliRunner

    from dkrp.cli import main

    src = tmp_path / "z.npy"
    _write_empty(src)
    r = CliRunner().invoke(main, ["ingest", str(src), str(tmp_path / "out.zarr")])
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [
        f"Error: {src} holds no rows (shape (0, 3)): nothing to ingest."]
    assert no_siblings(tmp_path / "out.zarr")


# -- inputs without feature columns are refused too: `featurize` could do nothing with them --


@pytest.mark.parametrize("name, text, options, match", [
    ("x.npy", None, {}, r"x\.npy has no feature columns \(5 rows of 0 features\)"),
    ("labels.csv", "label\n1\n2\n", {"label_column": "label"},
     r"labels\.csv has no feature columns \(2 rows of 0 features\)"),
    ("ids.csv", "Id,label\n1,0\n2,1\n", {"label_column": "label", "drop_columns": ["Id"]},
     r"ids\.csv has no feature columns \(2 rows of 0 features\)"),
    ("labels.svm", "1\n-1\n", {}, r"labels\.svm has no feature columns \(2 rows of 0 features\)"),
])
def test_inputs_without_feature_columns_are_refused(tmp_path, name, text, options, match):
    """A 5 x 0 .npy or a CSV of labels alone ingested with exit 0 ("5 rows x 0 features"),
    and only `featurize` refused it, in scikit-learn's words."""
    src = tmp_path / name
    if text is None:
        np.save(src, np.zeros((5, 0)))
    else:
        src.write_text(text)
    dest = tmp_path / "out.zarr"
    with pytest.raises(ValueError, match=match):
        ingest(src, dest, **options)
    assert no_siblings(dest)
