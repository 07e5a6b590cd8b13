"""Jobs on an external cluster whose workers are killed on a seeded schedule (issue 35, item 3).

A real ``dask scheduler`` and ``dask worker --nworkers 2`` on 127.0.0.1; while ``dkrp
featurize`` or ``dkrp train`` runs against them, a thread SIGKILLs one worker process at
each time of a schedule (which worker: a seeded draw). The nannies start replacements.
The jobs must finish, and their outputs must be byte-identical to an uninterrupted run's
on the same cluster: the features chunk for chunk, the model voter for voter.

The first kills land while the command starts (before or during its check of the
workers' memory: the false "give workers more memory" diagnosis of issue 35), the later
ones while tasks run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import psutil
import pytest
from conftest import REPO_ROOT, free_port, stop_processes

import dkrp
from dkrp.feature_store import open_features

pytestmark = pytest.mark.cluster

#: Seconds after the command starts at which a worker process is killed: issue 35's
#: schedule for featurize (1, 3, 5, 7 s; every try failed before the fix) and the
#: seconds between, so that whenever the command checks its workers' memory (about
#: 3-5 s in, after its imports and the fit), one of them is likely down or restarting.
STARTUP_AND_MIDRUN = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)


@pytest.fixture(scope="module")
def external_cluster(tmp_path_factory):
    """A scheduler and one ``dask worker`` process running 2 nannies, on 127.0.0.1.

    A task may outlive 5 deaths of its worker (allowed-failures): with 4 kills at
    random, no task can exhaust it, so a failure here is dkrp's.
    """
    logs_dir = tmp_path_factory.mktemp("chaos-logs")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "5"}
    logs = [open(logs_dir / f"{name}.log", "wb") for name in ("scheduler", "workers")]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--dashboard-address", "127.0.0.1:0"],
        env=env, stdout=logs[0], stderr=subprocess.STDOUT)]
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "2",
             "--nthreads", "1", "--memory-limit", "3GiB", "--host", "127.0.0.1",
             "--dashboard-address", "127.0.0.1:0"],
            env=env, stdout=logs[1], stderr=subprocess.STDOUT))
        _wait_for_workers(address, 2)
        yield address, procs[1].pid, env
    finally:
        stop_processes(procs, logs)


def _wait_for_workers(address, n, timeout=120):
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(n, timeout=timeout)


def _worker_processes(parent_pid):
    """The running worker processes of ``dask worker`` (``parent_pid``).

    With setproctitle installed a worker retitles its process "dask worker [ADDRESS]"
    once it has started; without it (distributed does not require it), a child other
    than multiprocessing's resource tracker counts once it is 3 s old. One that its
    nanny is still starting is left alone (a kill then would test the nanny).
    """
    try:
        children = psutil.Process(parent_pid).children()
    except psutil.NoSuchProcess:
        return []
    workers = []
    for child in children:
        try:
            command = " ".join(child.cmdline())
            titled = command.startswith("dask worker [")
            untitled = ("resource_tracker" not in command and "spawn_main" in command
                        and time.time() - child.create_time() > 3.0)
            if titled or untitled:
                workers.append(child)
        except psutil.NoSuchProcess:
            pass
    return sorted(workers, key=lambda p: p.pid)


class KillSchedule(threading.Thread):
    """SIGKILL a seeded choice of worker process at each time of ``times`` (seconds).

    Records, for each kill, the time and whether the command (``job``) was still running.
    """

    def __init__(self, parent_pid, times, seed):
        super().__init__(daemon=True)
        self.parent_pid, self.times = parent_pid, times
        self.rng = np.random.default_rng(seed)
        self.job = None
        self.kills = []
        self.stop = threading.Event()

    def run(self):
        t0 = time.monotonic()
        for at in self.times:
            if self.stop.wait(max(0.0, at - (time.monotonic() - t0))):
                return
            workers = _worker_processes(self.parent_pid)
            if not workers:
                continue  # both are being started: nothing to kill at this moment
            victim = workers[int(self.rng.integers(len(workers)))]
            try:
                os.kill(victim.pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.kills.append((round(time.monotonic() - t0, 1),
                               self.job is not None and self.job.poll() is None))


def _dkrp(args, env, schedule=None, timeout=300):
    """Run ``dkrp ARGS`` in a subprocess, with ``schedule`` killing workers meanwhile."""
    job = subprocess.Popen([sys.executable, "-m", "dkrp", *map(str, args)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if schedule is not None:
        schedule.job = job
        schedule.start()
    try:
        out, err = job.communicate(timeout=timeout)
    finally:
        if schedule is not None:
            schedule.stop.set()
            schedule.join()
        if job.poll() is None:
            job.kill()
    return job.returncode, out, err


def test_featurize_rides_out_workers_killed_at_start_up_and_mid_run(external_cluster,
                                                                     tmp_path):
    address, workers_pid, env = external_cluster
    X = np.random.default_rng(35).standard_normal((120_000, 54))
    np.save(tmp_path / "x.npy", X)
    command = ["featurize", tmp_path / "x.npy", None, "--n-components", 1000, "--dtype",
               "float32", "--chunk-rows", 3000, "--seed", 7, "--scheduler", address,
               "--quiet"]
    command[2] = tmp_path / "chaos.zarr"
    schedule = KillSchedule(workers_pid, STARTUP_AND_MIDRUN, seed=35)
    t0 = time.monotonic()
    rc, out, err = _dkrp(command, env, schedule)
    seconds = time.monotonic() - t0
    assert rc == 0, err
    assert sum(running for _, running in schedule.kills) >= 4, (
        f"fewer than 4 kills while the job ran ({seconds:.1f} s): {schedule.kills}")
    # a lost worker may be reported as such ("not for memory"), never as a memory error
    assert "Traceback" not in err and "more memory" not in err, err
    # what an uninterrupted run writes: the stored spec's transform, chunk by chunk
    # (the seed contract: the same bytes in any process for the same row chunks)
    features = open_features(tmp_path / "chaos.zarr")
    assert features.complete
    projector = dkrp.from_spec(features.spec)
    stored = features.Z
    assert stored.chunks[0] == (3000,) * 40
    for i in range(40):
        rows = slice(3000 * i, 3000 * (i + 1))
        expected = projector.transform(X[rows].astype(np.float32))  # float32 throughout
        assert stored[rows].compute().tobytes() == expected.tobytes(), f"chunk {i}"
    _wait_for_workers(address, 2)


def test_train_rides_out_a_worker_killed_every_few_seconds(external_cluster, tmp_path):
    from dkrp.io import ingest

    address, workers_pid, env = external_cluster
    rng = np.random.default_rng(36)
    X = rng.standard_normal((16_000, 20))
    y = (np.sin(X[:, 0]) + X[:, 1] * X[:, 2] > 0).astype(np.int64)
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])]).assign(label=y)
    frame.to_csv(tmp_path / "train.csv", index=False)
    ingest(tmp_path / "train.csv", tmp_path / "train.zarr", label_column="label",
           chunk_rows=2000)
    command = ["train", tmp_path / "train.zarr", "--out", None, "--voters", 8,
               "--strategy", "partition", "--n-components", 600, "--seed", 5,
               "--scheduler", address, "--quiet", "--yes"]
    command[3] = tmp_path / "clean"
    t0 = time.monotonic()
    rc, _, err = _dkrp(command, env)
    clean_seconds = time.monotonic() - t0
    assert rc == 0, err

    command[3] = tmp_path / "chaos"
    every = np.arange(1.0, 1.0 + max(4.0, clean_seconds), 2.5)
    schedule = KillSchedule(workers_pid, tuple(every), seed=36)
    rc, out, err = _dkrp(command, env, schedule)
    assert rc == 0, err
    assert sum(running for _, running in schedule.kills) >= 2, (
        f"fewer than 2 kills while training ran (clean run {clean_seconds:.1f} s): "
        f"{schedule.kills}")
    assert "Traceback" not in err and "KilledWorker" not in err, err
    assert not (tmp_path / ".chaos.partial").exists()
    voters = [np.load(tmp_path / name / "voters.npz") for name in ("chaos", "clean")]
    assert sorted(voters[0].files) == sorted(voters[1].files)
    for key in voters[1].files:
        assert voters[0][key].tobytes() == voters[1][key].tobytes(), key
    specs = [json.loads((tmp_path / name / "dkrp.json").read_text())
             for name in ("chaos", "clean")]
    for voter in (v for spec in specs for v in spec["voters"]):
        del voter["info"]["seconds"], voter["info"]["worker"]  # how long and where it ran
    for spec in specs:
        del spec["fit_seconds"]
    assert specs[0] == specs[1]
    _wait_for_workers(address, 2)
