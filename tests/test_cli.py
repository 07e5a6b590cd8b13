"""The ``dkrp`` command: CliRunner against a shared cluster, and one real scheduler + workers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import free_port, stop_processes

from dkrp.cli import main
from dkrp.feature_store import open_features

pytestmark = pytest.mark.cluster

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def scheduler_address():
    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster:
        yield cluster.scheduler_address


def _run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result


def _covtype_csv():
    from conftest import require_data

    return require_data("covtype", "kaggle_forest_cover_train.csv")


@pytest.mark.data
def test_covtype_ingest_featurize_equals_in_memory_and_rerun_is_noop(tmp_path,
                                                                      scheduler_address):
    from dkrp import PolynomialRandomProjection
    from dkrp.io import open_dataset

    csv = _covtype_csv()
    ds_path, out = tmp_path / "covtype.zarr", tmp_path / "features.zarr"
    r = _run("ingest", csv, ds_path, "--label-column", "Cover_Type", "--drop-column", "Id",
             "--chunk-rows", 2000)
    assert r.exit_code == 0, r.output
    assert "ingested 15120 rows x 54 features" in r.output
    args = ["featurize", ds_path, out, "--method", "krp", "--degree", 2, "--n-components", 300,
            "--n-hyperplanes", 200, "--seed", 5, "--scheduler", scheduler_address, "--quiet"]
    r = _run(*args)
    assert r.exit_code == 0, r.output
    assert "featurized 15120 rows -> 300 float64 features" in r.output
    assert "8 chunks written, 0 already done" in r.output and str(out.absolute()) in r.output

    X = open_dataset(ds_path).X.compute()
    krp = PolynomialRandomProjection(degree=2, n_components=300, n_hyperplanes=200,
                                     random_state=5).fit(X)
    Z = open_features(out).Z.compute()
    assert np.allclose(Z, krp.transform(X), rtol=1e-10, atol=1e-10)
    per_block = np.vstack([krp.transform(X[s : s + 2000]) for s in range(0, 15120, 2000)])
    assert np.array_equal(Z, per_block)

    r = _run(*args)  # the same command again: a no-op
    assert r.exit_code == 0 and "nothing to do (store complete)" in r.output
    assert "(8 chunks)" in r.output and "rows/s" not in r.output

    r = _run(*[a if a != 5 else 6 for a in args])  # another seed: refused, no traceback
    assert r.exit_code == 1
    assert "seed (random_state): store 5, this run 6" in r.output and "--overwrite" in r.output
    assert "Traceback" not in r.output

    r = _run("info", out)
    assert r.exit_code == 0
    assert "shape (15120, 300) float64" in r.output and "complete (8/8 chunks done)" in r.output
    assert "PolynomialRandomProjection seed 5" in r.output
    r = _run("info", ds_path)
    assert "dataset store" in r.output and "shape (15120, 54)" in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["featurize", "missing.zarr", "out.zarr"], "does not exist"),
        (["featurize", "x.npy", "out.zarr", "--method", "rff", "--n-hyperplanes", "3"],
         "does not take --n-hyperplanes; it takes --gamma, --kernel,"),
        (["featurize", "x.npy", "out.zarr", "--gamma", "wide"], "must be a number or 'scale'"),
        (["featurize", "x.npy", "out.zarr", "--n-features", "3"], "No such option"),
        (["featurize", "x.npy", "out.zarr", "--method", "rff", "--index-design", "balanced"],
         "does not take --index-design;"),
        (["featurize", "x.npy", "out.zarr", "--pool", "hexagonal"], "Invalid value for '--pool'"),
        (["featurize", "x.npy", "out.zarr", "--retries", "-1"], "Invalid value for '--retries'"),
        (["ingest", "missing.csv", "out.zarr"], "missing.csv"),
    ],
)
def test_user_errors_are_one_line(tmp_path, args, message):
    np.save(tmp_path / "x.npy", np.ones((4, 3)))
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = CliRunner().invoke(main, args)
    finally:
        os.chdir(old)
    assert r.exit_code != 0
    assert message in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_featurize_npy_with_rff_float32(tmp_path, scheduler_address):
    X = np.random.default_rng(0).standard_normal((500, 6))
    np.save(tmp_path / "x.npy", X)
    r = _run("featurize", tmp_path / "x.npy", tmp_path / "f.zarr", "--method", "rff",
             "--gamma", "scale", "--n-components", 20, "--dtype", "float32",
             "--scheduler", scheduler_address, "-q")
    assert r.exit_code == 0, r.output
    fs = open_features(tmp_path / "f.zarr")
    assert fs.Z.dtype == np.float32 and fs.Z.shape == (500, 20)
    assert fs.spec["fitted"]["gamma_"] == pytest.approx(1 / (6 * X.var()), rel=1e-9)


@pytest.mark.parametrize("form", ["tensor", "monomials"])
def test_featurize_explicit_takes_its_form(tmp_path, scheduler_address, form):
    # --form reaches the class: the store holds the Python estimator's features, and its
    # spec names the form (the monomial form of d=6 has 21 columns, not 36)
    from dkrp import ExplicitPolynomialProjection

    X = np.random.default_rng(1).standard_normal((300, 6))
    np.save(tmp_path / "x.npy", X)
    r = _run("featurize", tmp_path / "x.npy", tmp_path / "f.zarr", "--method", "explicit",
             "--form", form, "--n-components", 12, "--seed", 4,
             "--scheduler", scheduler_address, "-q")
    assert r.exit_code == 0, r.output
    fs = open_features(tmp_path / "f.zarr")
    assert fs.spec["params"]["form"] == form
    est = ExplicitPolynomialProjection(n_components=12, form=form, random_state=4).fit(X)
    assert est.n_explicit_features_ == {"tensor": 36, "monomials": 21}[form]
    np.testing.assert_allclose(fs.Z.compute(), est.transform(X), rtol=1e-12, atol=1e-12)


def test_demo_runs_on_digits(tmp_path, scheduler_address):
    # a user's file in --workdir named like the demo's rows is left as it was
    (tmp_path / "digits-train.npy").write_text("a user's file")
    r = _run("demo", "--scheduler", scheduler_address, "--quiet", "--workdir", tmp_path)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "digits-train.npy").read_text() == "a user's file"
    assert not list(tmp_path.glob(".*.npy"))  # the demo's own rows are gone once ingested
    assert (tmp_path / "digits-train.zarr").is_dir()
    lines = {line.split("  ")[0]: line for line in r.output.splitlines()}
    assert any(k.startswith("LinearSVC on KRP") for k in lines)
    acc = {k: float(v.split()[-3]) for k, v in lines.items()
           if k.startswith(("LinearSVC", "exact"))}
    assert acc["LinearSVC on raw inputs"] < max(v for k, v in acc.items() if "KRP" in k)
    assert min(acc.values()) > 0.9


def test_featurize_against_real_scheduler_and_workers(tmp_path):
    # `dask scheduler` + two `dask worker` processes on 127.0.0.1, then `dkrp featurize --scheduler`
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]), "DKRP_NUM_THREADS": "1"}
    logs = [open(tmp_path / f"proc{i}.log", "wb") for i in range(3)]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--dashboard-address", "127.0.0.1:0"],
        env=env, stdout=logs[0], stderr=subprocess.STDOUT)]
    try:
        for i in (1, 2):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                 "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0",
                 "--name", f"w{i}"],
                env=env, stdout=logs[i], stderr=subprocess.STDOUT))
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
        X = np.random.default_rng(1).standard_normal((3000, 10))
        np.save(tmp_path / "x.npy", X)
        cmd = [sys.executable, "-c", "from dkrp.cli import main; main()", "featurize",
               str(tmp_path / "x.npy"), str(tmp_path / "f.zarr"), "--n-components", "30",
               "--n-hyperplanes", "60", "--scheduler", address, "--quiet"]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr
        assert "featurized 3000 rows -> 30 float64 features" in run.stdout
        from dkrp import PolynomialRandomProjection

        krp = PolynomialRandomProjection(n_components=30, n_hyperplanes=60, random_state=0)
        Z = open_features(tmp_path / "f.zarr").Z.compute()
        assert np.allclose(Z, krp.fit(X).transform(X), rtol=1e-10, atol=1e-10)
    finally:
        stop_processes(procs, logs)


# -- help, methods, `python -m dkrp`, `dask dkrp` ------------------------------------------


def test_every_command_has_clear_help_with_an_example():
    r = _run("--help")
    assert r.exit_code == 0 and "Examples:" in r.output
    for name, command in main.commands.items():
        r = _run(name, "--help")
        assert r.exit_code == 0, r.output
        assert "Example" in r.output and f"  dkrp {name}" in r.output, name
        assert "..." not in command.get_short_help_str(limit=80), name  # not truncated


def test_methods_lists_every_method_its_flags_and_fit_pass():
    from dkrp.cli import OPTION_FLAGS, featurize, method_flags
    from dkrp.methods import METHODS, method_names

    r = _run("methods")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    flags_of_featurize = {opt for p in featurize.params for opt in p.opts}
    assert set(OPTION_FLAGS.values()) <= flags_of_featurize
    for name in method_names():
        info = METHODS[name]
        assert any(line.startswith(f"{name} ") for line in lines), name
        flags, _ = method_flags(name)
        assert all(f.split()[0] in flags_of_featurize for f in flags)
        assert info.data_dependent == info.load().data_dependent, name
    krp_flags, _ = method_flags("krp")  # read from the class's parameters
    assert {"--pool", "--index-design"} <= {f.split()[0] for f in krp_flags}
    assert r.output.count("data-dependent: exactly one pass over the input") == 3


def _npy_dataset(tmp_path, n=3000, d=12, chunk_rows=500):
    """A dataset store (chunked like a real one) made with `dkrp ingest`, and its array."""
    X = np.random.default_rng(7).standard_normal((n, d))
    np.save(tmp_path / "x.npy", X)
    r = _run("ingest", tmp_path / "x.npy", tmp_path / "x.zarr", "--chunk-rows", chunk_rows)
    assert r.exit_code == 0, r.output
    return tmp_path / "x.zarr", X


def _krp_store_on_300_row_chunks(tmp_path):
    """A 1,000-row dataset and a complete KRP store of it written 300 rows per chunk."""
    from dkrp.jobs import featurize_to_store
    from dkrp.methods import make_projector

    ds, _ = _npy_dataset(tmp_path, n=1000)
    out = tmp_path / "f.zarr"
    featurize_to_store(ds, out, make_projector("krp", n_components=40, n_hyperplanes=80,
                                               random_state=3),
                       chunk_rows=300, progress=False)
    return ds, out


def test_resume_with_another_chunk_rows_is_one_line_saying_what_to_do(tmp_path):
    # a partial store begun with 300 rows per chunk; --chunk-rows 200 on the same job is
    # refused before any cluster starts, naming the grid and the ways on
    ds, out = _krp_store_on_300_row_chunks(tmp_path)
    (out / "Z" / "c" / "2" / "0").unlink()  # as if killed before chunk 2
    r = _run("featurize", ds, out, "--method", "krp", "--n-components", 40,
             "--n-hyperplanes", 80, "--seed", 3, "--chunk-rows", 200, "--quiet")
    assert r.exit_code == 1
    assert r.output.count("\n") == 1 and "Traceback" not in r.output, r.output
    assert r.output.startswith(f"Error: The feature store {out.absolute()} was started with "
                               "300 rows per chunk, but --chunk-rows 200 was given")
    assert "run again without --chunk-rows or with --chunk-rows 300" in r.output
    assert "write to a new path (or pass --overwrite" in r.output
    assert not (out / "Z" / "c" / "2" / "0").exists()


def test_dry_run_with_another_chunk_rows_says_the_real_run_would_stop(tmp_path):
    # the dry run sizes the store's own grid, and says in one more line what the real run
    # says when --chunk-rows is not that grid; with --overwrite the replacement is sized
    # on the grid asked for
    ds, out = _krp_store_on_300_row_chunks(tmp_path)
    before = sorted(p.name for p in out.rglob("*"))
    job = ("featurize", ds, out, "--method", "krp", "--n-components", 40, "--n-hyperplanes",
           80, "--seed", 3, "--dry-run", "--quiet")
    r = _run(*job, "--chunk-rows", 200)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) == 2 and "in 4 chunks of 300 rows" in lines[0], r.output
    assert lines[1] == (
        f"The real run would stop: The feature store {out.absolute()} was started with 300 "
        "rows per chunk, but --chunk-rows 200 was given; a store keeps the chunk grid it was "
        "started with. Nothing was changed. To resume it, run again without --chunk-rows or "
        "with --chunk-rows 300; for 200 rows per chunk, write to a new path (or pass "
        "--overwrite to build the new store beside it and replace it once complete).")
    for extra, grid in (((), "4 chunks of 300 rows"), (("--chunk-rows", 300),
                                                       "4 chunks of 300 rows"),
                        (("--chunk-rows", 200, "--overwrite"), "5 chunks of 200 rows")):
        r = _run(*job, *extra)
        assert r.exit_code == 0 and r.output.count("\n") == 1 and grid in r.output, r.output
    assert sorted(p.name for p in out.rglob("*")) == before


def test_python_dash_m_dkrp(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "dkrp", "methods"], env=env,
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("explicit") and "structured" not in run.stderr


def test_dask_dkrp_help():
    import shutil
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group="dask_cli") if ep.name == "dkrp"]
    if not found:
        pytest.skip("dkrp's dask_cli entry point is not installed (pip install the package)")
    try:
        target = found[0].load()
    except Exception as exc:  # noqa: BLE001 - reported as the skip reason
        pytest.skip(f"the dask_cli entry point dkrp does not load: {exc!r}")
    assert target is main
    dask_exe = Path(sys.executable).with_name("dask")
    if not dask_exe.exists():
        dask_exe = shutil.which("dask")
    if not dask_exe:
        pytest.skip("the `dask` command is not installed next to this Python or on PATH")
    run = subprocess.run([str(dask_exe), "dkrp", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Usage: dask dkrp" in run.stdout and "featurize" in run.stdout


# -- the embedded cluster -------------------------------------------------------------------


def test_structured_pool_on_the_embedded_cluster_is_exact_and_rerun_is_a_noop(tmp_path):
    from dkrp import PolynomialRandomProjection

    ds, X = _npy_dataset(tmp_path)
    out = tmp_path / "sorf.zarr"
    args = ["featurize", ds, out, "--pool", "structured", "--index-design", "balanced",
            "--n-hyperplanes", 32, "--n-terms", 3, "--n-components", 40, "--seed", 9, "-q"]
    r = _run(*args)  # no --scheduler: the embedded LocalCluster
    assert r.exit_code == 0, r.output
    assert "6 chunks written, 0 already done" in r.output
    krp = PolynomialRandomProjection(n_components=40, n_hyperplanes=32, n_terms=3,
                                     pool="structured", index_design="balanced",
                                     random_state=9).fit(X)
    Z = open_features(out).Z.compute()
    assert np.array_equal(Z, np.vstack([krp.transform(X[s:s + 500]) for s in range(0, 3000, 500)]))
    assert np.allclose(Z, krp.transform(X), rtol=1e-12, atol=1e-12)
    spec = open_features(out).spec
    assert (spec["params"]["pool"], spec["params"]["index_design"]) == ("structured", "balanced")

    t0 = time.perf_counter()
    r = _run(*args)  # the same command again: a no-op, no cluster started
    assert r.exit_code == 0 and "nothing to do (store complete)" in r.output
    assert "(6 chunks)" in r.output and "rows/s" not in r.output
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize(
    ("method", "options", "landmarks"),
    [("nystroem", ["--n-components", 40], 40),
     ("kg-rp", ["--n-components", 30, "--n-hyperplanes", 50, "--n-terms", 10], 50)],
)
def test_data_dependent_methods_on_the_embedded_cluster(tmp_path, method, options, landmarks):
    from dkrp.methods import make_projector

    ds, X = _npy_dataset(tmp_path)
    out = tmp_path / "f.zarr"
    r = _run("featurize", ds, out, "--method", method, "--kernel", "polynomial", "--degree", 2,
             "--seed", 4, "--n-workers", 1, *options)
    assert r.exit_code == 0, r.output
    # what the CLI tells the user; that the fit reads only the landmark blocks, once, is
    # counted in test_blockwise.py
    assert (f"fit: {method} is data-dependent: fitting makes exactly one sampling pass over the "
            f"input ({landmarks} landmark rows") in r.stderr
    assert "fit: done in" in r.stderr and "6 chunks written" in r.stdout
    kw = {"n_components": 40} if method == "nystroem" else {
        "n_components": 30, "n_hyperplanes": 50, "n_terms": 10}
    est = make_projector(method, kernel="polynomial", degree=2, random_state=4, **kw).fit(X)
    fs = open_features(out)
    assert fs.spec["checksum"] == est.spec_checksum_  # the same landmarks, sampled in one pass
    assert np.allclose(fs.Z.compute(), est.transform(X), rtol=1e-10, atol=1e-10)


def test_ingest_mnist_idx_with_labels(tmp_path):
    from click.testing import CliRunner
    from conftest import require_data

    from dkrp.cli import main as cli_main
    from dkrp.io import open_dataset

    images = require_data("mnist", "t10k-images-idx3-ubyte.gz")
    labels = require_data("mnist", "t10k-labels-idx1-ubyte.gz")
    result = CliRunner().invoke(
        cli_main,
        ["ingest", str(images), str(tmp_path / "m.zarr"), "--labels", str(labels),
         "--dtype", "float32"],
    )
    assert result.exit_code == 0, result.output
    ds = open_dataset(tmp_path / "m.zarr")
    assert ds.X.shape == (10000, 784) and ds.y.shape == (10000,)
