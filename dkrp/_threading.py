"""In-process parallelism for transforms: row blocks spread over a thread pool.

Each thread runs a single-threaded GEMM followed by the compiled gather on the
same row block while it is still in cache. This beats a multi-threaded GEMM
followed by a multi-threaded gather, whose thread pools (OpenBLAS, numba) spin
against each other, and it makes every block's bits independent of how many
threads run: a block is always computed by one thread with one-thread BLAS.

The thread count is ``DKRP_NUM_THREADS`` if set, else the CPUs this process may
use; :func:`limit_threads` overrides it for the calling thread (the distributed
path uses it to give each Dask task its worker's share).
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from threadpoolctl import ThreadpoolController

__all__ = ["num_threads", "limit_threads", "run_row_blocks"]

_local = threading.local()
_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()
_controller: ThreadpoolController | None = None


def _blas_one_thread():
    """Context manager limiting BLAS to one thread (controller built once: it is slow)."""
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")


def num_threads() -> int:
    """Threads a transform may use in the calling thread."""
    override = getattr(_local, "n_threads", None)
    if override is not None:
        return override
    env = os.environ.get("DKRP_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def limit_threads(n: int):
    """Use at most ``n`` threads for transforms started in this thread."""
    previous = getattr(_local, "n_threads", None)
    _local.n_threads = max(1, int(n))
    try:
        yield
    finally:
        _local.n_threads = previous


def _pool(n: int) -> ThreadPoolExecutor:
    with _pools_lock:
        if n not in _pools:
            _pools[n] = ThreadPoolExecutor(max_workers=n, thread_name_prefix="dkrp")
        return _pools[n]


def run_row_blocks(n_rows: int, block_rows: int, work) -> None:
    """Call ``work(start, stop)`` for consecutive row blocks, in parallel.

    BLAS is limited to one thread while the blocks run, so the result of each
    block does not depend on the number of threads.
    """
    blocks = [(s, min(n_rows, s + block_rows)) for s in range(0, n_rows, block_rows)]
    n = min(num_threads(), len(blocks))
    with _blas_one_thread():
        if n <= 1:
            for start, stop in blocks:
                work(start, stop)
            return
        futures = [_pool(n).submit(work, start, stop) for start, stop in blocks]
        for f in futures:
            f.result()
