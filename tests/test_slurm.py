"""dkrp's SLURM jobs, submitted to a real single-node SLURM (``cluster/slurm/local_slurm.sh``).

A real ``slurmctld`` and ``slurmd`` (with ``munged``) run for the session, under a
directory of their own and on free ports; ``sbatch`` submits ``cluster/slurm/*.sbatch``
and ``dkrp ... --jobqueue slurm`` submits dask-jobqueue's worker jobs. The jobs run this
interpreter (``DKRP_PYTHON``) and this checkout (``PYTHONPATH``), which sbatch passes on
from the submitting environment. Without ``slurmctld`` (``apt-get install slurm-wlm
munge``, as ``.ci/run`` does when it is root) or without root, every test skips saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO_ROOT, free_port, store_digest

from dkrp.feature_store import open_features
from dkrp.io import ingest

pytestmark = pytest.mark.slurm

SLURM_DIR = REPO_ROOT / "cluster" / "slurm"
#: A terminal job state: the job's processes are gone (COMPLETING is not one).
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
#: The featurize job of these tests: 40 chunks of 256 rows, slow enough (about 0.1 s a
#: chunk on one core) that a job can be cancelled between its first and last chunk.
FEATURIZE = ("--n-components", "1000", "--n-hyperplanes", "256", "--n-terms", "4",
             "--seed", "4", "--dtype", "float32", "--quiet")
N_CHUNKS = 40
#: Every job's allocation: one CPU and 1 GiB, half this 2-CPU machine (at most).
SMALL = ("--cpus-per-task=1", "--mem=1G")


def _free_port_pair() -> int:
    """A port p with p and p + 1 free (slurmctld's and slurmd's)."""
    import socket

    for _ in range(50):
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """The environment (a dict) that submits jobs to a single-node SLURM started for the
    session: SLURM_CONF, and this interpreter and checkout for the jobs."""
    missing = [name for name in ("slurmctld", "slurmd", "munged", "sbatch")
               if shutil.which(name) is None]
    if missing:
        pytest.skip(f"SLURM is not installed (no {', '.join(missing)}): apt-get install -y "
                    "slurm-wlm munge, as root (.ci/run does)")
    if os.geteuid() != 0:
        pytest.skip("a single-node SLURM needs root (slurmd starts jobs as their user)")
    directory = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "DKRP_SLURM_PORT": str(_free_port_pair())}
    script = str(SLURM_DIR / "local_slurm.sh")
    started = subprocess.run([script, "start", str(directory)], env=env, capture_output=True,
                             text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stderr + _logs(directory)
        conf = re.search(r"export SLURM_CONF=(\S+)", started.stdout).group(1)
        # a job must not inherit the test run's own SLURM job variables, if any
        env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
        yield {**env, "SLURM_CONF": conf, "DKRP_PYTHON": sys.executable,
               "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    finally:
        subprocess.run([script, "stop", str(directory)], env=env, timeout=120)


def _logs(directory) -> str:
    return "".join(f"\n--- {p.name}\n{p.read_text()[-2000:]}"
                   for p in sorted(Path(directory, "log").glob("*.log")))


def _sbatch(slurm, where, *args) -> str:
    """Submit; the job id. ``args``: sbatch's options, then the script and its arguments."""
    run = subprocess.run(["sbatch", "--parsable", *args], env=slurm, cwd=where,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().split(";")[0]


def _job(slurm, job_id) -> dict:
    """``scontrol show job``'s fields of ``job_id`` (a finished job stays 5 minutes)."""
    run = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=slurm,
                         capture_output=True, text=True, timeout=30, check=True)
    return dict(field.split("=", 1) for field in run.stdout.split() if "=" in field)


def _wait(slurm, job_id, timeout=240) -> dict:
    """Wait until the job has finished (its processes gone); its fields."""
    deadline = time.monotonic() + timeout
    while True:
        job = _job(slurm, job_id)
        if job["JobState"] in FINISHED:
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job['JobState']}"
        time.sleep(0.2)


def _run_job(slurm, where, *args) -> tuple[dict, str]:
    """Submit, wait; the job's fields and its output file's text."""
    job = _wait(slurm, _sbatch(slurm, where, *args))
    return job, Path(job["StdOut"]).read_text()


def _n_done(store) -> int:
    folder = Path(store) / "done" / "c"
    return sum(name.isdigit() for name in os.listdir(folder)) if folder.is_dir() else 0


def _input_recorded(store) -> bool:
    """Whether the run writing ``store`` has recorded its input's fingerprint (on a
    cluster, once its first and last chunks are back): until then a stopped run's store
    is not tied to an input, and the next run starts it again rather than resuming."""
    try:
        attrs = json.loads((Path(store) / "zarr.json").read_text())["attributes"]
    except (FileNotFoundError, KeyError, ValueError):  # not there yet, or being replaced
        return False
    return bool(attrs.get("input", {}).get("edge_rows_sha256"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A dense dataset store of 40 chunks of 256 rows x 16 features, and its array."""
    where = tmp_path_factory.mktemp("slurm-data")
    X = np.random.default_rng(32).standard_normal((N_CHUNKS * 256, 16)).astype(np.float32)
    np.save(where / "x.npy", X)
    ingest(where / "x.npy", where / "x.zarr", chunk_rows=256)
    return where / "x.zarr", X


@pytest.fixture(scope="module")
def featurized(slurm, dataset, tmp_path_factory):
    """The featurize job, uninterrupted: the feature store and the job's output."""
    where = tmp_path_factory.mktemp("slurm-featurize")
    job, output = _run_job(slurm, where, *SMALL, str(SLURM_DIR / "featurize.sbatch"),
                           str(dataset[0]), "clean.zarr", *FEATURIZE)
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), output
    return where / "clean.zarr", output


def test_sbatch_featurize_writes_the_in_memory_transform_byte_for_byte(featurized, dataset):
    import dask.array as da

    from dkrp import PolynomialRandomProjection

    store, output = featurized
    assert f"featurized {N_CHUNKS * 256} rows -> 1000 float32 features" in output
    X = dataset[1]
    krp = PolynomialRandomProjection(n_components=1000, n_hyperplanes=256, n_terms=4,
                                     random_state=4).fit(X)
    expected = krp.transform(da.from_array(X, chunks=(256, -1))).compute(scheduler="sync")
    features = open_features(store)
    assert features.Z.compute().tobytes() == expected.tobytes()
    assert features.spec["checksum"] == krp.spec_checksum_  # the same spec


def test_a_job_smaller_than_the_machine_sizes_dkrp_to_its_allocation(slurm, tmp_path):
    from dkrp._resources import available_cpus

    if available_cpus() < 2:
        pytest.skip("needs a machine of 2 or more CPUs for a smaller allocation")
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, os\n"
        "from distributed import Client\n"
        "from dkrp._threading import num_threads\n"
        "from dkrp.parallel import start_local_cluster\n"
        "if __name__ == '__main__':\n"
        "    with start_local_cluster() as cluster, Client(cluster) as client:\n"
        "        workers = client.scheduler_info(n_workers=-1)['workers'].values()\n"
        "        shares = client.run(lambda: os.environ['DKRP_NUM_THREADS'])\n"
        "        print(json.dumps({'threads': num_threads(),\n"
        "                          'limits': [w['memory_limit'] for w in workers],\n"
        "                          'shares': sorted(shares.values())}))\n")
    job, output = _run_job(slurm, tmp_path, *SMALL, "--wrap",
                           f'exec "$DKRP_PYTHON" {probe}')
    assert job["JobState"] == "COMPLETED", output
    sized = json.loads(output.strip().splitlines()[-1])
    # 1 CPU and 1 GiB of a 2-CPU node: one single-threaded worker with the job's memory
    assert sized == {"threads": 1, "limits": [2**30], "shares": ["1"]}


def test_featurize_through_slurmcluster_worker_jobs_gives_the_same_bytes(
        slurm, dataset, featurized, tmp_path):
    # dask-jobqueue's job size and placement from the dask config, as a user sets it:
    # 2 jobs of 1 core and 1 GiB, the scheduler and workers on the loopback interface
    env = {**slurm, "DASK_JOBQUEUE__SLURM__CORES": "1", "DASK_JOBQUEUE__SLURM__MEMORY": "1GiB",
           "DASK_JOBQUEUE__SLURM__INTERFACE": "lo",
           "DASK_JOBQUEUE__SLURM__LOG_DIRECTORY": str(tmp_path / "jobs"),
           "DASK_JOBQUEUE__SLURM__SHARED_TEMP_DIRECTORY": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "dkrp", "featurize", str(dataset[0]), str(tmp_path / "j.zarr"),
         *FEATURIZE, "--jobqueue", "slurm", "--jobs", "2"],
        env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    # two worker jobs ran, each a TLS worker on 127.0.0.1
    logs = sorted((tmp_path / "jobs").glob("*.err"))
    assert len(logs) == 2, logs
    for log in logs:
        assert re.search(r"Start worker at: +tls://127\.0\.0\.1:", log.read_text()), \
            log.read_text()
    clean = open_features(featurized[0]).Z.compute()
    assert open_features(tmp_path / "j.zarr").Z.compute().tobytes() == clean.tobytes()


def test_scancel_mid_run_then_the_same_sbatch_resumes_byte_identically(
        slurm, dataset, featurized, tmp_path):
    command = (*SMALL, str(SLURM_DIR / "featurize.sbatch"), str(dataset[0]), "out.zarr",
               *FEATURIZE)
    job_id = _sbatch(slurm, tmp_path, *command)
    out = tmp_path / "out.zarr"
    # the kill point is data-driven: the input recorded and 3 chunks done
    deadline = time.monotonic() + 180
    while _n_done(out) < 3 or not _input_recorded(out):
        state = _job(slurm, job_id)["JobState"]
        assert state not in FINISHED, (state, Path(_job(slurm, job_id)["StdOut"]).read_text())
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.01)
    subprocess.run(["scancel", job_id], env=slurm, check=True, timeout=30)
    assert _wait(slurm, job_id)["JobState"] == "CANCELLED"
    done = _n_done(out)
    assert 3 <= done < N_CHUNKS
    job, output = _run_job(slurm, tmp_path, *command)
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), output
    # only the missing chunks (in-flight ones may have been written after the count)
    written = int(re.search(r"(\d+) chunks written", output).group(1))
    assert written <= N_CHUNKS - done
    assert list(store_digest(out).values()) == list(store_digest(featurized[0]).values())


def _labelled(where, name, X, y):
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])]).assign(label=y)
    frame.to_csv(where / f"{name}.csv", index=False)
    ingest(where / f"{name}.csv", where / f"{name}.zarr", label_column="label", chunk_rows=100)
    return where / f"{name}.zarr"


def test_ensembles_trained_by_sbatch_predict_what_one_trained_in_process_does(
        slurm, tmp_path):
    import zarr

    from dkrp import RandomFeatureVotingClassifier, load

    rng = np.random.default_rng(14)
    X = rng.standard_normal((400, 6))
    y = (X[:, 0] * X[:, 1] + 0.3 * rng.standard_normal(400) > 0).astype(np.int64)
    train, test = _labelled(tmp_path, "train", X[:300], y[:300]), \
        _labelled(tmp_path, "test", X[300:], y[300:])
    options = ("--voters", "3", "--n-components", "40", "--gamma", "0.5", "--seed", "5")
    # the sbatch script, and beside it (2 CPUs: both run at once) the pipeline script
    # unchanged in a job
    pipeline = REPO_ROOT / "pipelines" / "train_ensemble.py"
    jobs = [_sbatch(slurm, tmp_path, *SMALL, str(SLURM_DIR / "train.sbatch"), str(train),
                    "--out", "model", *options, "--quiet"),
            _sbatch(slurm, tmp_path, *SMALL, "--wrap", f'exec "$DKRP_PYTHON" {pipeline} '
                    f'{train} --test {test} --out pipeline-model {" ".join(options)} --quiet')]
    for job_id in jobs:
        job = _wait(slurm, job_id)
        output = Path(job["StdOut"]).read_text()
        assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), output
    assert "REPORT {" in output
    job, output = _run_job(slurm, tmp_path, *SMALL, str(SLURM_DIR / "predict.sbatch"),
                           "model", str(test), "--out", "pred.zarr")
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), output
    assert "accuracy" in output
    in_process = RandomFeatureVotingClassifier(n_voters=3, n_components=40, gamma=0.5,
                                               random_state=5).fit(X[:300], y[:300])
    predicted = np.asarray(zarr.open_array(str(tmp_path / "pred.zarr" / "y_pred"), mode="r")[:])
    np.testing.assert_array_equal(predicted, in_process.predict(X[300:]))
    np.testing.assert_array_equal(load(tmp_path / "model").predict(X[300:]), predicted)
    np.testing.assert_array_equal(load(tmp_path / "pipeline-model").predict(X[300:]), predicted)


def test_a_job_with_bad_input_fails_with_the_one_line_error_in_its_output(slurm, tmp_path):
    (tmp_path / "x.npy").write_bytes(b"not an array")
    job, output = _run_job(slurm, tmp_path, *SMALL, str(SLURM_DIR / "featurize.sbatch"),
                           "x.npy", "out.zarr", *FEATURIZE)
    assert job["JobState"] == "FAILED" and job["ExitCode"] == "1:0", job
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), output
    assert "x.npy" in lines[0] and "Traceback" not in output
    assert not (tmp_path / "out.zarr").exists()


def test_worker_jobs_sbatch_refuses_end_the_command_with_sbatchs_one_line_error(
        slurm, dataset, tmp_path):
    env = {**slurm, "DASK_JOBQUEUE__SLURM__CORES": "1", "DASK_JOBQUEUE__SLURM__MEMORY": "1GiB",
           "DASK_JOBQUEUE__SLURM__INTERFACE": "lo", "DASK_JOBQUEUE__SLURM__QUEUE": "nosuch",
           "DASK_JOBQUEUE__SLURM__SHARED_TEMP_DIRECTORY": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "dkrp", "featurize", str(dataset[0]), str(tmp_path / "j.zarr"),
         *FEATURIZE, "--jobqueue", "slurm"], env=env, capture_output=True, text=True,
        timeout=120)
    assert run.returncode == 1
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("Error: sbatch refused dkrp's worker jobs: sbatch: error: "
                               "invalid partition specified: nosuch"), lines[0]
    assert not (tmp_path / "j.zarr").exists()
