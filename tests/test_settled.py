"""compute_settled: a failed computation of writing tasks raises only once none of them runs.

Three writers sleep, then write a file; a fourth task fails at once. dask alone raises
while the writers sleep, and their files appear after the caller has the error (the
store a failed run leaves would still change, and a build's deleted sibling would be
written into again). With ``compute_settled`` the started writers have ended, so
their files are there when the error arrives, and nothing changes afterwards.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import dask
import pytest

from dkrp._settled import compute_settled

DELAY = 0.4


def _write_after(path: str, delay: float) -> str:
    time.sleep(delay)
    Path(path).write_text("written")
    return path


def _fail() -> None:
    raise ValueError("bad block")


def _start_then_write(started: str, path: str, delay: float) -> str:
    Path(started).touch()
    return _write_after(path, delay)


def _tasks(tmp_path):
    write = dask.delayed(_start_then_write, pure=False)
    writers = [write(str(tmp_path / f"s{i}"), str(tmp_path / f"w{i}"), DELAY)
               for i in range(3)]
    return [dask.delayed(_fail, pure=False)(), *writers]


def _files(tmp_path, prefix):
    return sorted(p.name[1:] for p in tmp_path.glob(f"{prefix}*"))


def _raises_once_settled(tmp_path, **kwargs):
    """Compute ``_tasks``, which must raise only once every writer that started has
    written (however many threads ran them: on one, the failure may come first); then
    nothing changes. The writers that had started, as ``w<i>``."""
    with pytest.raises(ValueError, match="bad block"):
        compute_settled(*_tasks(tmp_path), **kwargs)
    started, written = _files(tmp_path, "s"), _files(tmp_path, "w")
    assert written == started  # every writer that started had ended
    time.sleep(DELAY + 0.2)
    assert (_files(tmp_path, "s"), _files(tmp_path, "w")) == (started, written)
    return [f"w{i}" for i in written]


@pytest.mark.parametrize("how", ["default", "threads", "num_workers"])
def test_a_failure_on_dask_threads_is_raised_once_the_started_writers_end(tmp_path, how):
    kwargs = {"scheduler": "threads"} if how == "threads" else {}
    with dask.config.set(num_workers=4 if how == "num_workers" else None,
                         scheduler="threads" if how == "num_workers" else None):
        written = _raises_once_settled(tmp_path, **kwargs)
    # (4 threads or more, as on any machine with 4 CPUs: every writer had started)
    if how == "num_workers":
        assert written == ["w0", "w1", "w2"]


def test_a_failure_on_a_cluster_is_raised_once_the_started_writers_end(tmp_path, caplog):
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    # 8 threads: the barrier finds a thread free at once; what waits is the polling
    with start_local_cluster(n_workers=1, threads_per_worker=8, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as in_process:
        with caplog.at_level("INFO", logger="dkrp._settled"):
            written = _raises_once_settled(tmp_path, scheduler=in_process)
        # the barrier and the polling both worked: neither had to give up
        assert not [r for r in caplog.records if r.name == "dkrp._settled"]
        # the failed computation is forgotten: nothing of it is left on the cluster
        assert not in_process.run_on_scheduler(_dkrp_or_writer_tasks)
    assert written == ["w0", "w1", "w2"]


def _dkrp_or_writer_tasks(dask_scheduler=None):
    return [str(k) for k in dask_scheduler.tasks
            if "_write_after" in str(k) or str(k).startswith("dkrp-settle-")]


@pytest.fixture
def in_process_client():
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=1, threads_per_worker=8, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as in_process:
        yield in_process


def _started(in_process, tmp_path, n, delay, prefix):
    """``n`` tasks keyed ``prefix<i>`` that each touch ``started-<i>``, sleep, then write
    ``w<i>``; returned once all have started."""
    def task(i):
        (tmp_path / f"started-{i}").touch()
        return _write_after(str(tmp_path / f"w{i}"), delay)

    futures = [in_process.submit(task, i, key=f"{prefix}{i}", pure=False) for i in range(n)]
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("started-*"))) < n:
        assert time.monotonic() < deadline, "the tasks did not start"
        time.sleep(0.01)
    return futures


def test_settle_waits_for_the_cancelled_running_tasks_of_a_key_prefix(tmp_path,
                                                                       in_process_client):
    # as a feature store's failed run names its writes: by their keys' prefix
    from dkrp._settled import settle

    futures = _started(in_process_client, tmp_path, 2, DELAY, "dkrp-test-write-")
    in_process_client.cancel(futures)
    settle(in_process_client, "dkrp-test-write-")
    assert sorted(p.name for p in tmp_path.glob("w*")) == ["w0", "w1"]


def test_settle_gives_up_after_its_timeout_naming_five_of_the_tasks(tmp_path,
                                                                     in_process_client,
                                                                     caplog):
    # a hung write does not hold the error back for ever: it is logged, with its key
    from dkrp._settled import settle

    futures = _started(in_process_client, tmp_path, 7, 3.0, "dkrp-test-hung-")
    in_process_client.cancel(futures)
    with caplog.at_level("WARNING", logger="dkrp._settled"):
        settle(in_process_client, {f.key for f in futures}, timeout=1.0)
    assert not list(tmp_path.glob("w*"))  # it returned while they still ran
    assert [r.getMessage() for r in caplog.records if r.name == "dkrp._settled"] == [
        "7 cancelled tasks still running after 1 s: "
        + ", ".join(f"dkrp-test-hung-{i}" for i in range(5))]


def test_the_barrier_waits_for_a_thread_on_every_worker(tmp_path):
    # the barrier's task for a worker runs on that worker, behind whatever holds its
    # thread: with worker A's one thread busy for 0.3 s and worker B idle, the barrier
    # returns once A has run its task (not at once, as B could run A's for it)
    from distributed import Client

    from dkrp._settled import _cancellation_barrier
    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=2, threads_per_worker=1, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as in_process:
        a = sorted(in_process.nthreads())[0]
        started, ended = tmp_path / "started", tmp_path / "ended"
        held = in_process.submit(_start_then_write, str(started), str(ended), 0.3,
                                 workers=[a], pure=False)
        while not started.exists():
            time.sleep(0.005)
        _cancellation_barrier(in_process, time.monotonic() + 30)
        assert ended.exists()  # A's task had ended: A's barrier ran after it
        held.result()


def test_the_barrier_sends_one_task_to_each_worker_and_runs_it_there():
    # a barrier task that ran on another worker would say nothing of its own: each is
    # pinned to its worker (no loose restriction) and ran there
    from distributed import Client
    from distributed.diagnostics.plugin import SchedulerPlugin

    from dkrp._settled import _cancellation_barrier
    from dkrp.parallel import start_local_cluster

    class Where(SchedulerPlugin):
        def __init__(self, scheduler):
            self.scheduler, self.seen = scheduler, []

        def transition(self, key, start, finish, *args, **kwargs):
            if str(key).startswith("dkrp-settle-") and finish == "processing":
                ts = self.scheduler.tasks[key]
                self.seen.append((ts.worker_restrictions, ts.loose_restrictions,
                                  ts.processing_on.address))

    with start_local_cluster(n_workers=3, threads_per_worker=1, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as in_process:
        where = Where(cluster.scheduler)
        cluster.scheduler.add_plugin(where, name="dkrp-test-where")
        _cancellation_barrier(in_process, time.monotonic() + 30)
        workers = sorted(in_process.nthreads())
    assert sorted((sorted(r), loose, on) for r, loose, on in where.seen) == [
        ([w], False, w) for w in workers]


def test_settle_on_a_closed_client_says_why_it_cannot_wait_and_returns(caplog):
    from distributed import Client

    from dkrp._settled import settle
    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=1, threads_per_worker=1, processes=False) as cluster:
        closed = Client(cluster, set_as_default=False)
        closed.close()
        with caplog.at_level("INFO", logger="dkrp._settled"):
            settle(closed, {"any"})
    messages = [r.getMessage() for r in caplog.records if r.name == "dkrp._settled"]
    assert [m.split(": ")[0] for m in messages] == [
        "could not wait for the workers' barrier", "could not ask the workers what they still run"]
    assert all("AttributeError" in m for m in messages)


class _Concurrency:
    """How many of its tasks ran at once, at most."""

    def __init__(self):
        self.lock, self.active, self.most = threading.Lock(), 0, 0

    def task(self, i):
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
        time.sleep(0.15)
        with self.lock:
            self.active -= 1
        return i


@pytest.mark.parametrize("num_workers", [None, 1, 3])
def test_the_thread_pool_has_the_threads_dask_is_configured_with(num_workers):
    # dask.config's num_workers (a user's setting, or dask's default of one thread a
    # CPU) sizes the pool that compute_settled makes in place of dask's own
    from dask.system import CPU_COUNT

    threads = num_workers or CPU_COUNT
    seen = _Concurrency()
    tasks = [dask.delayed(seen.task, pure=False)(i) for i in range(threads + 2)]
    with dask.config.set(num_workers=num_workers):
        assert compute_settled(*tasks) == tuple(range(threads + 2))
    assert seen.most == threads


def test_ctrl_c_is_raised_at_once_without_waiting_for_the_started_tasks(tmp_path):
    # the user asked to stop now: the interrupt is not held back for the writers
    def interrupt():
        raise KeyboardInterrupt

    write = dask.delayed(_write_after, pure=False)
    tasks = [dask.delayed(interrupt, pure=False)(),
             *(write(str(tmp_path / f"w{i}"), 2.0) for i in range(3))]
    with dask.config.set(num_workers=4), pytest.raises(KeyboardInterrupt):
        compute_settled(*tasks)
    assert not list(tmp_path.glob("w*"))  # raised while they still ran


def test_the_scheduler_asked_for_or_configured_is_the_one_that_runs_the_tasks():
    # scheduler="sync" runs in the calling thread; a thread pool a user configured
    # (dask.config "pool") is used as dask would use it, not replaced
    from concurrent.futures import ThreadPoolExecutor

    where = dask.delayed(lambda: threading.current_thread().name, pure=False)
    assert compute_settled(where(), scheduler="sync") == (threading.current_thread().name,)
    with dask.config.set(scheduler="sync"):
        assert compute_settled(where()) == (threading.current_thread().name,)
    with ThreadPoolExecutor(1, thread_name_prefix="users-pool") as pool, \
            dask.config.set(pool=pool):
        (name,) = compute_settled(where())
    assert name.startswith("users-pool")


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_results_come_back_in_order(scheduler):
    double = dask.delayed(lambda x: 2 * x, pure=True)
    assert compute_settled(*[double(i) for i in range(5)], scheduler=scheduler) == (
        0, 2, 4, 6, 8)


def test_results_come_back_in_order_on_a_cluster():
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    double = dask.delayed(lambda x: 2 * x, pure=True)
    with start_local_cluster(n_workers=1, threads_per_worker=2, processes=False) as cluster, \
            Client(cluster, set_as_default=False) as in_process:
        assert compute_settled(*[double(i) for i in range(5)], scheduler=in_process) == (
            0, 2, 4, 6, 8)
