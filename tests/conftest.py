"""Shared fixtures: the real-data directory, the paper's MNIST test sample, small inputs for io."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, settings
from sklearn.datasets import dump_svmlight_file

from dkrp.datasets import data_dir
from dkrp.io import ingest, read_idx

REPO_ROOT = Path(__file__).resolve().parents[1]

# the fast default set and --full (tests/suite_selection.py)
pytest_plugins = ["suite_selection"]



def pytest_configure(config):
    if config.getoption("--full"):
        fork_workers_from_a_warm_server()


def fork_workers_from_a_warm_server():
    """Start the tests' worker processes by forking a server that has imported the stack.

    A spawned worker imports numpy, scikit-learn, zarr, distributed and dkrp afresh: 2-5 s
    of CPU for each of the full suite's many clusters (the CLI's subprocesses keep
    spawning theirs, as a user's do). Distributed's own suite does the same. The server
    starts with the first nanny, after it has set ``OMP_NUM_THREADS=1`` and the like
    (``distributed.nanny.pre-spawn-environ``), so its BLAS has one thread, as a spawned
    worker's has.
    """
    import dask
    from distributed.utils import get_mp_context

    dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
    # after distributed's own get_mp_context, which sets its preload list once
    get_mp_context().set_forkserver_preload([
        "distributed", "numpy", "pandas", "scipy.sparse", "scipy.stats", "dask.array",
        "sklearn.base", "sklearn.svm", "sklearn.linear_model", "zarr", "numcodecs",
        "threadpoolctl", "dkrp", "dkrp.features", "dkrp._blockwise", "dkrp.feature_store",
    ])


# Property tests stay small (each example fits and transforms a projector). "ci" is
# derandomized: the same examples on every run, so a failure is reproducible from the
# log; select it with HYPOTHESIS_PROFILE=ci.
settings.register_profile("default", max_examples=15, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True,
                          database=None, print_blob=True)
# CI (which sets CI=true) runs the derandomized profile: a red build is reproducible
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE",
                                    "ci" if os.environ.get("CI") else "default"))


def real_data_root() -> Path:
    """:func:`dkrp.datasets.data_dir` when that folder exists, else skip the test saying so."""
    root = data_dir()
    if not root.is_dir():
        pytest.skip(
            f"real data not available: no folder {root} (set DKRP_DATA_DIR to the folder "
            "holding the shared datasets, or provide ../shared/data)"
        )
    return root


def require_data(*relative: str) -> Path:
    """Path of a file under the data directory, or skip the test saying what is missing."""
    path = data_dir().joinpath(*relative)
    if not path.exists():
        pytest.skip(
            f"needs the real dataset file {path} (set DKRP_DATA_DIR to the folder holding "
            "the shared datasets; see ../shared/data/README.md)"
        )
    return path


def no_siblings(dest: Path) -> bool:
    """True when neither dest nor any temporary sibling of it exists."""
    siblings = [p for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}.")]
    return not dest.exists() and not siblings


@pytest.fixture(scope="module")
def client():
    """A real cluster for a test module: dkrp's own ``LocalCluster`` of 2 worker processes
    × 1 thread on 127.0.0.1, and a client that is not made the default one (a test
    module needing a default client defines its own ``client``)."""
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster, \
            Client(cluster, set_as_default=False) as c:
        yield c


@pytest.fixture(scope="session")
def mnist_test_500():
    """500 random MNIST test digits scaled to [-1, 1) as in the KRP paper (x/127.5 - 1)."""
    X = read_idx(require_data("mnist", "t10k-images-idx3-ubyte.gz"), expected_magic=2051)
    X = X.reshape(-1, 784)
    rows = np.random.default_rng(2018).choice(X.shape[0], 500, replace=False)
    return X[rows] / 127.5 - 1.0


@pytest.fixture(scope="session")
def mnist():
    """MNIST training images and 500 test digits, pixels scaled to [-1, 1) (x/127.5 - 1)."""

    def images(name):
        X = read_idx(require_data("mnist", name), expected_magic=2051)
        return X.reshape(X.shape[0], -1)

    train = images("train-images-idx3-ubyte.gz")
    test = images("t10k-images-idx3-ubyte.gz")
    pick = np.random.default_rng(2018).choice(len(test), 500, replace=False)
    return train / 127.5 - 1.0, test[pick] / 127.5 - 1.0


@pytest.fixture
def shared_file():
    """Return a function giving a real data file, or skipping when it is absent."""

    def get(relative: str) -> Path:
        root = real_data_root()
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


@pytest.fixture
def small_store(tmp_path):
    """A dense 10 x 4 dataset store in row blocks of 3, ingested from ``tmp_path/x.npy``."""
    np.save(tmp_path / "x.npy", np.arange(40.0).reshape(10, 4))
    dest = tmp_path / "x.zarr"
    ingest(tmp_path / "x.npy", dest, chunk_rows=3)
    return dest


def peak_allocation(func):
    """``(func(), peak bytes numpy and Python allocated while it ran)``, by tracemalloc."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = func()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


def assert_projects_into_out(estimator, X, n_projections):
    """``estimator._project_block`` writes into the ``out`` it is given (and returns it),
    with the bits it computes without ``out``, in float32 and float64."""
    for dtype in (np.float32, np.float64):
        Xd = X.astype(dtype)
        out = np.full((X.shape[0], n_projections), np.nan, dtype=dtype)
        assert estimator._project_block(Xd, dtype, out=out) is out
        assert out.tobytes() == estimator._project_block(Xd, dtype).tobytes()


def store_digest(path) -> dict:
    """Relative path -> sha256 of every file in a store."""
    import hashlib

    path = Path(path)
    return {
        str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.rglob("*"))
        if f.is_file()
    }


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a scheduler subprocess)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_processes(procs, logs=()):
    """Terminate real scheduler/worker subprocesses (last started first), then close logs.

    A process still running 3 s after SIGTERM is killed: the tests own these processes and
    check nothing of their shutdown, and a worker's graceful close (waiting on a scheduler
    that is closing too) took 8 s of every such test's teardown.
    """
    for p in reversed(procs):
        p.terminate()
    for p in reversed(procs):
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for log in logs:
        log.close()
