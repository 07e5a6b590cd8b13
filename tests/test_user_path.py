"""Issue 11, cases 4-7: help and defaults, the demo, honest summaries, ecosystem fit.

Real files throughout (the shared Covertype CSV and a9a where the case is about them),
and real clusters where workers are involved: a module LocalCluster for the CliRunner
tests, and subprocesses for what only a separate process shows (imports, signals).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dkrp.cli import main

REPO_ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "scipy", "sklearn", "numba", "distributed", "pandas", "zarr")


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _python(code, **env):
    full = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **env}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=full, timeout=120, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _flat(text):
    return " ".join(text.split())


@pytest.fixture(scope="module")
def scheduler_address():
    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster:
        yield cluster.scheduler_address


# -- case 4: defaults, help, chunks ----------------------------------------------------------


def test_import_dkrp_and_cli_help_import_nothing_heavy():
    code = ("import sys, dkrp; a = [m for m in {h!r} if m in sys.modules]\n"
            "from dkrp.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('LOADED', a, [m for m in {h!r} if m in sys.modules])").format(h=HEAVY)
    last = _python(code).strip().splitlines()[-1]
    assert last == "LOADED [] []"


def test_every_public_name_still_imports():
    import dkrp

    for name in dkrp.__all__:
        assert getattr(dkrp, name) is not None
    from dkrp import Nystroem, PolynomialRandomProjection, SpecError, featurize_to_store  # noqa
    assert "RandomFourierFeatures" in dir(dkrp)
    with pytest.raises(AttributeError):
        dkrp.NoSuchThing  # noqa: B018


def test_spec_rebuilds_in_a_process_that_imported_no_projector(tmp_path):
    from dkrp import Nystroem, PolynomialRandomProjection

    X = np.random.default_rng(0).standard_normal((60, 5))
    for est in (PolynomialRandomProjection(n_components=8, random_state=1).fit(X),
                Nystroem(n_components=10, random_state=2).fit(X)):
        spec = tmp_path / f"{type(est).__name__}.json"
        spec.write_text(json.dumps(est.to_spec()))
        np.save(tmp_path / "X.npy", X)
        out = _python(
            "import sys, json, numpy as np\n"
            "from dkrp._spec import from_spec, _REGISTRY\n"
            "assert not _REGISTRY, _REGISTRY\n"
            f"p = from_spec(open({str(spec)!r}).read())\n"
            f"Z = p.transform(np.load({str(tmp_path / 'X.npy')!r}))\n"
            f"np.save({str(tmp_path / 'Z.npy')!r}, Z)\n"
            "print(type(p).__name__)")
        assert out.strip() == type(est).__name__
        assert np.array_equal(np.load(tmp_path / "Z.npy"), est.transform(X))


def test_unknown_spec_class_still_refused():
    from dkrp import SpecError, from_spec
    from dkrp._spec import SPEC_FORMAT, SPEC_FORMAT_VERSION

    with pytest.raises(SpecError, match="Unknown projector class 'NoSuchMap'.*TensorSketch"):
        from_spec({"format": SPEC_FORMAT, "format_version": SPEC_FORMAT_VERSION,
                   "class": "NoSuchMap"})


def test_featurize_help_shows_each_methods_defaults():
    out = _flat(_run("featurize", "--help").output)
    assert "--n-components INTEGER RANGE" in out
    assert "[default: 100; pca: 50]" in out
    assert "[default: 1000]" in out  # --n-hyperplanes: krp and kg-rp alike
    assert "[default: 1; kg-rp: 30; srf: 10]" in out  # --n-terms
    assert "rff: 1.0]" in out  # --gamma
    assert "[default: krp]" in out and "[default: 0; x>=0]" in out  # --method, --seed


@pytest.mark.data
@pytest.mark.parametrize("source, args", [
    (("covtype", "kaggle_forest_cover_train.csv"), ["--label-column", "Cover_Type",
                                                    "--drop-column", "Id"]),
    (("a9a", "a9a.bz2"), ["--format", "libsvm"]),
])
def test_default_ingest_gives_every_worker_a_chunk(tmp_path, source, args):
    from conftest import require_data

    from dkrp.io import open_dataset

    dest = tmp_path / "ds.zarr"
    r = _run("ingest", require_data(*source), dest, *args)
    assert r.exit_code == 0, r.output
    n_chunks = len(open_dataset(dest).X.chunks[0])
    assert n_chunks >= min(4, 2 * len(os.sched_getaffinity(0))), n_chunks


# -- case 6 (and the dashboard line of case 4): honest summaries -----------------------------


@pytest.mark.cluster  # featurize without --scheduler: the embedded worker processes
def test_featurize_reports_wall_time_dashboard_and_a_noop_rerun(tmp_path):
    np.save(tmp_path / "X.npy", np.random.default_rng(0).standard_normal((3000, 6)))
    args = ["featurize", tmp_path / "X.npy", tmp_path / "f.zarr", "--n-components", 20,
            "--n-workers", 1]
    first = _run(*args)
    assert first.exit_code == 0, first.output
    assert "dask dashboard: http://127.0.0.1:" in first.output
    assert "s of work (" in first.output and "s wall including the cluster's start" in first.output
    again = _run(*args)
    assert again.exit_code == 0, again.output
    assert "nothing to do (store complete)" in again.output
    assert "rows/s" not in again.output and "dashboard" not in again.output  # no cluster
    quiet = _run(*args[:2], tmp_path / "g.zarr", *args[3:], "--quiet")
    assert quiet.exit_code == 0 and "dashboard" not in quiet.output


def test_info_json_summarises_learnt_arrays(tmp_path, scheduler_address):
    np.save(tmp_path / "X.npy", np.random.default_rng(0).standard_normal((2000, 30)))
    store = tmp_path / "nys.zarr"
    r = _run("featurize", tmp_path / "X.npy", store, "--method", "nystroem",
             "--n-components", 400, "--scheduler", scheduler_address, "--quiet")
    assert r.exit_code == 0, r.output
    short, full = _run("info", store, "--json"), _run("info", store, "--json", "--full")
    assert short.exit_code == 0 and full.exit_code == 0
    assert len(short.output) < 20_000 < len(full.output)
    arrays = json.loads(short.output)["spec"]["arrays"]
    assert arrays and all({"shape", "dtype", "sha256"} <= set(v) for v in arrays.values())
    assert [400, 30] in [v["shape"] for v in arrays.values()]
    assert _run("info", store, "--full").exit_code != 0  # --full goes with --json


# -- case 5: the demo ------------------------------------------------------------------------


@pytest.mark.data
@pytest.mark.slow
def test_demo_covtype_finishes_with_progress_lines(scheduler_address):
    from conftest import require_data

    require_data("covtype", "kaggle_forest_cover_train.csv")
    t0 = time.perf_counter()
    r = _run("demo", "--dataset", "covtype", "--max-train", 1000,
             "--scheduler", scheduler_address)
    assert r.exit_code == 0, r.output
    steps = [line for line in r.output.replace("\r", "\n").splitlines()
             if line.startswith("demo [")]
    assert any("LinearSVC on KRP" in s for s in steps), steps
    assert any("exact-kernel SVC, RBF" in s for s in steps), steps
    assert "LinearSVC on RFF" in r.output and "total" in r.output
    assert time.perf_counter() - t0 < 240


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_demo_interrupted_leaves_no_temporary_directory(tmp_path, sig):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dkrp", "demo", "--dataset", "digits", "--n-workers", "1"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, cwd=REPO_ROOT, text=True)
    try:
        seen = ""
        deadline = time.monotonic() + 120
        while "featurizing with" not in seen and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen += line
        assert "featurizing with" in seen, seen
        assert list(tmp_path.glob("dkrp-demo-*"))  # the directory exists now
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert proc.returncode != 0
    assert not list(tmp_path.glob("dkrp-demo-*"))


# -- case 7: ecosystem fit -------------------------------------------------------------------


def test_new_dataset_and_feature_stores_open_with_xarray(tmp_path, scheduler_address):
    xr = pytest.importorskip("xarray")
    csv = tmp_path / "d.csv"
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((700, 4)), rng.integers(0, 3, 700)
    csv.write_text("a,b,c,d,label\n" + "".join(
        ",".join(f"{v:.17g}" for v in row) + f",{t}\n" for row, t in zip(X, y, strict=True)))
    assert _run("ingest", csv, tmp_path / "d.zarr", "--label-column", "label").exit_code == 0
    r = _run("featurize", tmp_path / "d.zarr", tmp_path / "f.zarr", "--n-components", 16,
             "--scheduler", scheduler_address, "--quiet")
    assert r.exit_code == 0, r.output
    ds = xr.open_zarr(tmp_path / "d.zarr")
    assert ds["X"].dims == ("sample", "feature") and ds["y"].dims == ("sample",)
    np.testing.assert_array_equal(ds["X"].values, X)
    np.testing.assert_array_equal(ds["y"].values, y)
    fs = xr.open_zarr(tmp_path / "f.zarr")
    assert fs["Z"].dims == ("sample", "component") and fs["Z"].shape == (700, 16)
    from dkrp.feature_store import open_features

    np.testing.assert_array_equal(fs["Z"].values, open_features(tmp_path / "f.zarr").Z.compute())


@pytest.mark.data
def test_ingest_parses_csv_and_libsvm_on_the_cluster(tmp_path, scheduler_address):
    from conftest import require_data
    from distributed import Client

    from dkrp.io import open_dataset

    csv = require_data("covtype", "kaggle_forest_cover_train.csv")
    svm = require_data("a9a", "a9a.bz2")
    cases = [(csv, ["--label-column", "Cover_Type", "--drop-column", "Id"], "csv_block"),
             (svm, ["--format", "libsvm"], "write_libsvm_block")]
    for src, args, prefix in cases:
        local, remote = tmp_path / f"{prefix}-local.zarr", tmp_path / f"{prefix}-cluster.zarr"
        assert _run("ingest", src, local, *args).exit_code == 0
        r = _run("ingest", src, remote, *args, "--scheduler", scheduler_address)
        assert r.exit_code == 0, r.output
        with Client(scheduler_address) as client:
            prefixes = client.run_on_scheduler(
                lambda dask_scheduler: list(dask_scheduler.task_prefixes))
        assert prefix in prefixes
        a, b = open_dataset(local), open_dataset(remote)
        np.testing.assert_array_equal(a.X.compute(), b.X.compute())
        np.testing.assert_array_equal(a.y.compute(), b.y.compute())
        assert a.y.dtype == b.y.dtype


def test_from_parquet_blocks_follow_row_groups(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from dkrp.io import from_parquet
    from dkrp.io.tabular import _row_group_chunks

    X = np.random.default_rng(0).standard_normal((5000, 3))
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({f"c{j}": X[:, j] for j in range(3)}), path, row_group_size=1200)
    A = from_parquet(path)
    assert A.chunks[0] == (5000,)  # 24 bytes a row: every group fits one block
    np.testing.assert_array_equal(A.compute(), X)
    # a block never cuts a group: merged up to the byte target, a large group alone
    assert _row_group_chunks([1200, 1200, 1200, 400], 24, max_bytes=24 * 2500) == (2400, 1600)
    assert _row_group_chunks([400_000], 8, max_bytes=8 * 50_000) == (400_000,)
    assert from_parquet(path, chunk_rows=1000).chunks[0] == (1000,) * 5
