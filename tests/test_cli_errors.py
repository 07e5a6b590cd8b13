"""Errors reaching the command line: one or two lines saying what failed, where and what to
do, in the CLI's own words; a traceback only with -v (issue 10, cases 3 and 6)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dkrp.cli._group import error_message

REPO_ROOT = Path(__file__).resolve().parents[1]


def _dkrp(*args, cwd):
    # this checkout's dkrp, whichever one the interpreter has installed
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "dkrp", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def truncated_bz2(tmp_path):
    import bz2

    text = b"".join(b"%d 1:0.5 3:1.25\n" % (i % 2) for i in range(20000))
    data = bz2.compress(text)
    path = tmp_path / "part.svm.bz2"
    path.write_bytes(data[: len(data) // 2])
    return path


def test_truncated_compressed_input_says_so_without_traceback(tmp_path, truncated_bz2):
    run = _dkrp("ingest", truncated_bz2, tmp_path / "out.zarr", cwd=tmp_path)
    assert run.returncode == 1
    err = run.stderr.strip().splitlines()
    assert len(err) <= 2, run.stderr
    assert "truncated or corrupt" in run.stderr and str(truncated_bz2) in run.stderr
    assert "Traceback" not in run.stderr and "Aborted" not in run.stderr
    assert not (tmp_path / "out.zarr").exists()

    verbose = _dkrp("-v", "ingest", truncated_bz2, tmp_path / "out.zarr", cwd=tmp_path)
    assert verbose.returncode == 1
    assert "Traceback" in verbose.stderr and "EOFError" in verbose.stderr


def test_csv_errors_use_the_command_line_names(tmp_path):
    src = tmp_path / "cells.csv"
    src.write_text("Id,a,b,label\n1,0.5,0.25,1\n2,0.1,oops,1\n")
    run = _dkrp("ingest", src, tmp_path / "out.zarr", "--label-column", "label",
                "--drop-column", "Id", cwd=tmp_path)
    assert run.returncode == 1
    assert "line 3" in run.stderr and "'oops'" in run.stderr
    assert "--drop-column b" in run.stderr and "drop_columns" not in run.stderr


def test_unexpected_errors_ask_to_report_the_bug():
    # issue 31, item 3: not a DkrpError nor a file error, so a bug; its traceback is shown
    # above this line (tests/test_errors.py), so the line does not ask for -v
    message = error_message(RuntimeError("boom"))
    assert "RuntimeError: boom" in message and "bug in dkrp" in message
    assert "report it" in message and "-v" not in message


def test_corrupt_bz2_input_is_named(tmp_path):
    # a flipped byte inside a .bz2 stream raises a bare OSError("Invalid data stream")
    import bz2

    from click.testing import CliRunner

    from dkrp.cli import main

    data = bytearray(bz2.compress(b"".join(b"%d 1:0.5 3:1.25\n" % (i % 2)
                                           for i in range(20000))))
    data[len(data) // 2] ^= 0xFF
    path = tmp_path / "part.svm.bz2"
    path.write_bytes(bytes(data))
    with pytest.raises(OSError, match="Invalid data stream"):
        bz2.decompress(bytes(data))
    run = CliRunner().invoke(main, ["ingest", str(path), str(tmp_path / "out.zarr")])
    assert run.exit_code == 1
    assert str(path) in run.output and "truncated or corrupt" in run.output, run.output
    assert "unexpected" not in run.output and "report it" not in run.output
    assert not (tmp_path / "out.zarr").exists()


# -- featurize --like/--spec: a map that cannot take the input is refused up front ------------


def _cli(*args):
    from click.testing import CliRunner

    from dkrp.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def standardizing_map(tmp_path):
    """A feature store whose map standardizes (dense 6-column input, dask's local
    scheduler), its spec as a file, and a sparse dataset store of 6 columns."""
    import numpy as np

    from dkrp import RandomFourierFeatures, featurize_to_store
    from dkrp.io import ingest

    np.save(tmp_path / "train.npy", np.random.default_rng(0).uniform(0, 255, (120, 6)))
    featurize_to_store(tmp_path / "train.npy", tmp_path / "train-f.zarr",
                       RandomFourierFeatures(n_components=16, gamma=0.5, random_state=0),
                       standardize=True, progress=False)
    (tmp_path / "spec.json").write_text(_cli("info", "--spec", tmp_path / "train-f.zarr").output)
    (tmp_path / "test.svm").write_text(
        "".join(f"{i % 2} 1:0.5 4:1.25 6:{i / 100}\n" for i in range(80)))
    ingest(tmp_path / "test.svm", tmp_path / "test.zarr", sparse=True)
    return tmp_path


def test_a_standardizing_map_refuses_sparse_input_before_any_cluster(standardizing_map):
    # before: the workers refused every row, leaving an empty incomplete store and
    # advising a rerun that could not work
    tmp = standardizing_map
    test, out = tmp / "test.zarr", tmp / "test-f.zarr"
    for flags in (["--like", tmp / "train-f.zarr"], ["--spec", tmp / "spec.json"],
                  ["--method", "rff", "--standardize"]):
        r = _cli("featurize", test, out, *flags)
        assert r.exit_code == 1, r.output
        assert "sparse" in r.output and "dkrp ingest --dense" in r.output, r.output
        assert "--scale-rows unit" in r.output and "scale_rows" not in r.output
        assert "standardize=True" not in r.output
        assert "dask dashboard" not in r.output  # no cluster was started
        assert not out.exists()


def test_like_refuses_an_incomplete_store(tmp_path):
    # a run that failed half-way (NaN in the last chunk) on dask's local scheduler
    import dask.array as da
    import numpy as np

    from dkrp import PolynomialRandomProjection
    from dkrp.feature_store import write_features

    X = np.random.default_rng(1).standard_normal((200, 6))
    X[-1, 0] = np.nan
    krp = PolynomialRandomProjection(n_components=20, n_hyperplanes=40, random_state=0)
    with pytest.raises(ValueError, match="NaN"):
        write_features(da.from_array(X, chunks=(50, 6)), krp.fit_n_features(6),
                       tmp_path / "train-f.zarr", progress=False)
    np.save(tmp_path / "test.npy", np.ones((30, 6)))
    r = _cli("featurize", tmp_path / "test.npy", tmp_path / "test-f.zarr",
             "--like", tmp_path / "train-f.zarr")
    assert r.exit_code == 1, r.output
    assert "incomplete" in r.output and "of 4 chunks written" in r.output, r.output
    assert "dkrp verify" in r.output and "dask dashboard" not in r.output
    assert not (tmp_path / "test-f.zarr").exists()


# -- a task that fails on the workers: dkrp's line only; -v adds the workers' traceback ------


def test_a_failing_task_prints_one_line_naming_what_it_left(tmp_path):
    # on the embedded cluster. Before, the worker's "Compute Failed" record and traceback
    # came first; for an input whose first chunk is corrupt, then the scheduler's
    # warning of the store's input fingerprint reusing the failed read's keys; and a
    # failed --overwrite did not say what the .f.zarr.overwrite beside the store is
    import numpy as np

    from dkrp import PolynomialRandomProjection, featurize_to_store
    from dkrp.io import ingest

    X = np.random.default_rng(2).standard_normal((60, 4))
    np.save(tmp_path / "x.npy", X)
    ingest(tmp_path / "x.npy", tmp_path / "d.zarr")  # one chunk: the first and last rows
    chunk = tmp_path / "d.zarr" / "X" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    run = _dkrp("featurize", "d.zarr", "new.zarr", "--n-workers", 1, "--quiet", cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr.startswith("Error: ") and len(run.stderr.splitlines()) == 1, run.stderr
    assert "X/c/0/0" in run.stderr and "corrupt" in run.stderr

    # under -v the workers' records stay; the line names what the failed --overwrite left
    featurize_to_store(tmp_path / "x.npy", tmp_path / "f.zarr",
                       PolynomialRandomProjection(n_components=8), progress=False)
    X[30, 1] = np.nan
    np.save(tmp_path / "nan.npy", X)
    run = _dkrp("-v", "featurize", "nan.npy", "f.zarr", "--n-components", 8, "--n-workers", 1,
                "--quiet", "--overwrite", cwd=tmp_path)
    assert run.returncode == 1
    assert "Compute Failed" in run.stderr and "Traceback" in run.stderr
    sibling = tmp_path / ".f.zarr.overwrite"
    line = run.stderr.splitlines()[-1]
    assert line.startswith("Error: ") and "NaN" in line, run.stderr
    assert f"{sibling} holds the unfinished replacement of {tmp_path / 'f.zarr'}" in line
    assert f"delete {sibling}" in line and sibling.is_dir()
