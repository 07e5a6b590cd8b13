"""dkrp.parallel on a real LocalCluster of worker processes: featurize, fit, cluster checks."""

from __future__ import annotations

import ipaddress
import os

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from dkrp import PolynomialRandomProjection, RandomFourierFeatures, SpecError
from dkrp.parallel import check_workers, featurize, fit_dask, start_local_cluster

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster():
    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster):
    from distributed import Client

    with Client(cluster) as client:
        yield client


def _krp(n_features=64, **params):
    params = {"n_components": 96, "n_hyperplanes": 200, "n_terms": 2, "random_state": 7, **params}
    return PolynomialRandomProjection(**params).fit_n_features(n_features)


def test_featurize_matches_in_memory_transform(client):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 64))
    krp = _krp()
    Xd = da.from_array(X, chunks=(700, 64))
    Z = featurize(Xd, krp)
    assert Z.chunks == (Xd.chunks[0], (96,))
    assert Z.dtype == np.float64
    # the same row blocks in memory give the same bits
    blocks = [krp.transform(X[s : s + 700]) for s in range(0, 3000, 700)]
    assert np.array_equal(Z.compute(), np.vstack(blocks))


def test_csr_blocks_equal_dense(client):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((1200, 64)) * (rng.random((1200, 64)) < 0.1)
    krp = _krp()
    dense = da.from_array(X, chunks=(400, 64))
    sparse = dense.map_blocks(sp.csr_matrix, dtype=X.dtype, meta=sp.csr_matrix((0, 0)))
    assert np.allclose(featurize(sparse, krp).compute(), featurize(dense, krp).compute(),
                       rtol=1e-12, atol=1e-12)


def test_float32_preserved_zero_rows_and_dtype_override(client):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((500, 64)).astype(np.float32)
    krp = _krp()
    Z = featurize(da.from_array(X, chunks=(200, 64)), krp)
    assert Z.dtype == np.float32 and Z.compute().dtype == np.float32
    empty = featurize(da.from_array(X[:0], chunks=(0, 64)), krp).compute()
    assert empty.shape == (0, 96)
    Z64 = featurize(da.from_array(X, chunks=(200, 64)), krp, dtype="float64")
    assert Z64.compute().dtype == np.float64
    ints = featurize(da.from_array(np.arange(640).reshape(10, 64), chunks=(5, 64)), krp)
    assert ints.dtype == np.float64


def test_nan_names_partition_and_global_row(client):
    # R12: NaN at partition 7, local row 13 (blocks of 100 rows -> global row 713)
    X = np.random.default_rng(4).standard_normal((1000, 64))
    X[713, 5] = np.nan
    with pytest.raises(ValueError, match=r"Input X contains NaN \(at partition 7, local row 13, "
                                         r"global row 713\)"):
        featurize(da.from_array(X, chunks=(100, 64)), _krp()).compute()
    X[713, 5] = np.inf
    with pytest.raises(ValueError,
                       match=r"Input X contains infinity .*partition 7.*global row 713"):
        featurize(da.from_array(X, chunks=(100, 64)), _krp()).compute()


def test_fit_dask_data_independent_and_gamma_scale(client):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((2000, 16)) * 3.0
    Xd = da.from_array(X, chunks=(500, 16))
    krp = PolynomialRandomProjection(n_components=8, n_hyperplanes=16, random_state=0)
    assert fit_dask(krp, Xd) is krp and krp.n_features_in_ == 16
    rff = RandomFourierFeatures(n_components=32, gamma="scale", random_state=0)
    rff.fit(Xd)  # dispatches to fit_dask
    ref = RandomFourierFeatures(n_components=32, gamma="scale", random_state=0).fit(X)
    assert rff.gamma_ == pytest.approx(ref.gamma_, rel=1e-10)
    assert np.allclose(rff.transform(Xd).compute(), ref.transform(X), atol=1e-9)


def test_check_workers_all_equal_and_names_a_perturbed_worker(client):
    # R1: every worker regenerates the client's hyperplanes; R20: one that does not is named
    krp = _krp(n_hyperplanes=600)  # > BLOCK_SIZE: several seed blocks
    checksums = check_workers(client, krp)
    assert len(checksums) == 2 and set(checksums.values()) == {krp.spec_checksum_}

    victim = sorted(client.scheduler_info()["workers"])[0]

    def perturb_generator():
        import dkrp._random

        dkrp._random.BLOCK_SIZE = 128  # another stream layout: other hyperplanes

    def restore_generator():
        import dkrp._random

        dkrp._random.BLOCK_SIZE = 256

    client.run(perturb_generator, workers=[victim])
    try:
        with pytest.raises(SpecError, match=f"worker {victim}") as info:
            check_workers(client, krp)
        assert "1 of 2 workers" in str(info.value)
        # a featurize task on that worker refuses too, naming it
        Xd = da.ones((10, 64), chunks=(10, 64))
        fut = client.compute(featurize(Xd, _krp(n_hyperplanes=600, random_state=99)),
                             workers=[victim])
        with pytest.raises(SpecError, match=f"On worker {victim}"):
            fut.result()
    finally:
        client.run(restore_generator, workers=[victim])


def test_embedded_cluster_listens_on_loopback_only(cluster, client):
    # R15: scheduler, dashboard and nannies (this process) and every worker process
    psutil = pytest.importorskip("psutil")
    pids = {os.getpid(), *client.run(os.getpid).values()}
    listening = []
    for pid in pids:
        for conn in psutil.Process(pid).net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                listening.append((pid, conn.laddr.ip, conn.laddr.port))
    assert len(listening) >= 2 + 2 * len(pids) - 2  # scheduler+dashboard, worker+http each
    assert all(ipaddress.ip_address(ip).is_loopback for _, ip, _ in listening), listening
    assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")


def _start_environ():
    """In a worker: the environment its process started with (what glibc read)."""
    with open("/proc/self/environ", "rb") as f:
        items = [i.split(b"=", 1) for i in f.read().split(b"\0") if b"=" in i]
    return {k.decode(): v.decode() for k, v in items}


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="needs Linux /proc")
def test_embedded_cluster_workers_start_with_dkrp_malloc_settings(cluster, client):
    # distributed's MALLOC_TRIM_THRESHOLD_=65536 makes every array a task allocates fresh
    # pages; dkrp's own workers start with WORKER_MALLOC_ENV instead, set before the
    # process starts (glibc reads it then: an os.environ change inside the worker is too late)
    from dkrp.parallel import WORKER_MALLOC_ENV

    for env in client.run(_start_environ).values():
        assert {k: env.get(k) for k in WORKER_MALLOC_ENV} == WORKER_MALLOC_ENV


def test_a_users_malloc_setting_is_kept():
    import dask

    from dkrp.parallel import WORKER_MALLOC_ENV, _worker_malloc_env

    assert _worker_malloc_env() == WORKER_MALLOC_ENV  # distributed's default is replaced
    key = "distributed.nanny.pre-spawn-environ"
    with dask.config.set({key: {"MALLOC_TRIM_THRESHOLD_": 1 << 20}}):
        assert _worker_malloc_env() == {
            "MALLOC_MMAP_THRESHOLD_": WORKER_MALLOC_ENV["MALLOC_MMAP_THRESHOLD_"]}
    with dask.config.set({key: {"MALLOC_TRIM_THRESHOLD_": 65536,
                                "MALLOC_MMAP_THRESHOLD_": 1 << 16}}):
        assert _worker_malloc_env() == {
            "MALLOC_TRIM_THRESHOLD_": WORKER_MALLOC_ENV["MALLOC_TRIM_THRESHOLD_"]}


def _widest_pool():
    """In a worker: the most threads a dkrp row-block pool of this process has (1: none)."""
    from dkrp import _threading

    return max(_threading._pools, default=1)


def _task_thread_budget(_):
    from dkrp._blockwise import task_threads

    return task_threads()


def _set_dkrp_threads(value):
    if value is None:
        os.environ.pop("DKRP_NUM_THREADS", None)
    else:
        os.environ["DKRP_NUM_THREADS"] = value


def test_plain_local_cluster_task_uses_its_workers_share(monkeypatch):
    # issue 15 (b): in a worker of a plain LocalCluster (no DKRP_NUM_THREADS), a task used
    # every CPU of the machine, so two 1-thread workers ran 2 x CPUs threads
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 or more CPUs: with one, a worker's share and the machine agree")
    from distributed import Client, LocalCluster

    monkeypatch.delenv("DKRP_NUM_THREADS", raising=False)  # workers inherit this environment
    rng = np.random.default_rng(3)
    X = rng.standard_normal((4 * 2048, 64))
    krp = _krp()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        workers = sorted(client.scheduler_info()["workers"])
        assert set(client.run(os.environ.get, "DKRP_NUM_THREADS").values()) == {None}
        budgets = client.gather([client.submit(_task_thread_budget, w, workers=[w], pure=False)
                                 for w in workers])
        assert budgets == [1, 1]
        # the transform itself: 2048-row blocks span 4 KRP row blocks, which a task with
        # more than one thread spreads over a pool of that many threads
        Z = featurize(da.from_array(X, chunks=(2048, 64)), krp).compute()
        assert set(client.run(_widest_pool).values()) == {1}
        blocks = [krp.transform(X[s:s + 2048]) for s in range(0, X.shape[0], 2048)]
        assert np.array_equal(Z, np.vstack(blocks))
        # DKRP_NUM_THREADS, when set, is the worker's share (here 2 for its one thread)
        client.run(_set_dkrp_threads, "2")
        budgets = client.gather([client.submit(_task_thread_budget, w, workers=[w], pure=False)
                                 for w in workers])
        client.run(_set_dkrp_threads, None)
        assert budgets == [2, 2]


def test_in_process_cluster_starts_and_binds_its_dashboards_to_loopback():
    # processes=False: workers in this process over distributed's inproc:// transport,
    # which takes no host (passing 127.0.0.1 to it failed to start); the dashboards,
    # which do listen, stay on 127.0.0.1
    import psutil
    from distributed import Client

    with start_local_cluster(n_workers=1, threads_per_worker=1, processes=False) as cluster, \
            Client(cluster) as client:
        assert cluster.scheduler.address.startswith("inproc://")
        assert client.submit(int, "7", pure=False).result() == 7
        listening = {c.laddr.ip for c in psutil.Process().net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN}
        assert listening <= {"127.0.0.1"}
