"""Computing tasks that write, so that a failure is raised only once none of them runs.

When one task of a computation fails, dask raises at once: the tasks already started
go on in the background (dask cannot interrupt a thread), and here they write chunks,
done markers or blocks of a store being built. The caller that catches the error would
see its store still changing, and a build's hidden sibling, deleted on the error, would
be written into again after its deletion and left behind.

:func:`compute_settled` is ``dask.compute`` for such tasks: on dask's thread pool it
runs them on a pool of its own, which it drains (the tasks not started are dropped) before
the error reaches the caller; on a ``distributed`` cluster it cancels the other tasks and
waits (:func:`settle`) until no worker runs one. dask's process pool already waits
for its tasks when it shuts down. Not on Ctrl-C: the user asked to stop now.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from uuid import uuid4

import dask

logger = logging.getLogger(__name__)

__all__ = ["SETTLE_SECONDS", "compute_settled", "settle"]

#: How long a failed computation waits for its started tasks to end.
SETTLE_SECONDS = 60.0


def compute_settled(*tasks, scheduler=None) -> tuple:
    """``dask.compute(*tasks, scheduler=scheduler)``, raising only once no task runs.

    Parameters
    ----------
    *tasks : dask collections or delayed objects
        What to compute.
    scheduler : str, distributed.Client or None
        As for ``dask.compute``; ``None`` is the active scheduler.

    Returns
    -------
    tuple
        The tasks' results, in order.
    """
    import dask.threaded
    from distributed import Client

    get = dask.base.get_scheduler(scheduler=scheduler, collections=tasks)
    client = getattr(get, "__self__", None)
    if isinstance(client, Client):
        return _compute_on_client(client, tasks)
    if get is dask.threaded.get and dask.config.get("pool", None) is None:
        return _compute_on_own_threads(tasks)
    return dask.compute(*tasks, scheduler=scheduler)


def _compute_on_own_threads(tasks) -> tuple:
    from dask.system import CPU_COUNT
    from dask.threaded import ContextAwareThreadPoolExecutor

    pool = ContextAwareThreadPoolExecutor(dask.config.get("num_workers", None) or CPU_COUNT)
    interrupted = False
    try:
        return dask.compute(*tasks, scheduler="threads", pool=pool)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)


def _compute_on_client(client, tasks) -> tuple:
    futures = client.compute(list(tasks))
    try:
        return tuple(client.gather(futures))
    except BaseException as exc:
        client.cancel(futures)
        if not isinstance(exc, KeyboardInterrupt):
            settle(client, {f.key for f in futures}, SETTLE_SECONDS)
        raise


def settle(client, keys: str | Collection, timeout: float = SETTLE_SECONDS) -> None:
    """Wait until no worker runs a task of ``keys``, cancelled before this call.

    Cancelling a future does not stop a task a worker is already running; the task
    finishes, and goes on to write. First waits until every worker has heard of the
    cancellation (:func:`_cancellation_barrier`), so that no cancelled task starts
    later. Gives up after ``timeout`` seconds (a hung task), logging the keys.

    Parameters
    ----------
    client : distributed.Client
        The client that cancelled them.
    keys : str or collection of keys
        The tasks' keys, or (a ``str``) the prefix of their keys.
    timeout : float
        Seconds to wait at most.
    """
    deadline = time.monotonic() + timeout
    _cancellation_barrier(client, deadline)
    keys = keys if isinstance(keys, str) else frozenset(keys)
    running = []
    while True:
        try:
            running = [k for found in client.run(_running_keys, keys).values() for k in found]
        except Exception as exc:  # noqa: BLE001 - e.g. a worker gone: nothing to wait for there
            logger.info("could not ask the workers what they still run: %r", exc)
            return
        if not running or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if running:
        logger.warning("%d cancelled tasks still running after %.0f s: %s",
                       len(running), timeout, ", ".join(sorted(map(str, running))[:5]))


def _cancellation_barrier(client, deadline: float) -> None:
    """Return once every worker has taken in the cancellation sent before this call.

    ``Client.cancel`` reaches the scheduler over the client's message stream, and the
    scheduler tells each worker over that worker's stream; ``Client.run`` takes another
    path and can overtake both, finding a cancelled task still queued on a worker that
    starts it right after. A task sent to each worker now follows the same two streams,
    behind the cancellation: once it has run there, that worker runs no queued task of
    those cancelled, only the ones that already held a thread.
    """
    futures = {}
    try:
        futures = {
            client.submit(_barrier_task, key=f"dkrp-settle-{uuid4().hex}-{i}",
                          workers=[w], allow_other_workers=False, pure=False): w
            for i, w in enumerate(client.nthreads())
        }
        waiting = dict(futures)
        while waiting and time.monotonic() < deadline:
            waiting = {f: w for f, w in waiting.items() if f.status == "pending"}
            if waiting:
                # a worker that left will never run its barrier, nor any task
                alive = set(client.nthreads())
                waiting = {f: w for f, w in waiting.items() if w in alive}
                time.sleep(0.02)
    except Exception as exc:  # noqa: BLE001 - e.g. the scheduler gone: nothing to wait for
        logger.info("could not wait for the workers' barrier: %r", exc)
    finally:
        for future in futures:
            future.release()


def _barrier_task() -> None:
    """Nothing: a task whose having run on a worker is the message."""


def _running_keys(keys, dask_worker=None) -> list:
    """This worker's running tasks (cancelled ones too) of ``keys`` (a set or a prefix)."""
    # all_running_tasks holds executing and long-running tasks, cancelled or not
    running = dask_worker.state.all_running_tasks
    if isinstance(keys, str):
        return [ts.key for ts in running if str(ts.key).startswith(keys)]
    return [ts.key for ts in running if ts.key in keys]
