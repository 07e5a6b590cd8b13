"""In-process parallelism for transforms: row blocks spread over a thread pool.

Each thread runs a single-threaded GEMM followed by the compiled gather on the
same row block while it is still in cache. This beats a multi-threaded GEMM
followed by a multi-threaded gather, whose thread pools (OpenBLAS, numba) spin
against each other, and it makes every block's bits independent of how many
threads run: a block is always computed by one thread with one-thread BLAS.

The thread count is ``DKRP_NUM_THREADS`` if set, else the CPUs this process may
use; :func:`limit_threads` overrides it for the calling thread (the distributed
path uses it to give each Dask task its worker's share: ``DKRP_NUM_THREADS`` divided
among the worker's task threads, or one thread per task when it is not set).

:func:`scratch` hands each thread a work array it keeps between blocks. Allocating a
fresh one per block costs a page fault per 4 KiB in a Dask worker: distributed sets
``MALLOC_TRIM_THRESHOLD_``, which pins glibc's mmap threshold at 128 KiB, so every
block's multi-MiB temporary is mapped, zeroed by the kernel and unmapped again
(measured in ``benchmarks/RESULTS.md``, section ``bench_distributed_covertype``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import ThreadpoolController

__all__ = ["configured_threads", "num_threads", "limit_threads", "run_row_blocks", "scratch"]

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


def configured_threads() -> int | None:
    """``DKRP_NUM_THREADS`` (at least 1), or None when it is not set."""
    env = os.environ.get("DKRP_NUM_THREADS")
    return max(1, int(env)) if env else None


def num_threads() -> int:
    """Threads a transform may use in the calling thread."""
    override = getattr(_local, "n_threads", None)
    if override is not None:
        return override
    env = configured_threads()
    if env is not None:
        return env
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


def scratch(name: str, shape, dtype) -> np.ndarray:
    """A work array of ``shape`` and ``dtype`` owned by the calling thread.

    The same thread calling again with the same ``name`` gets (a view of) the same
    memory, so its previous contents are gone: use it for a temporary that dies
    before the next call, such as one row block's projections. Its memory grows
    to the largest request and is kept while the thread lives.

    Parameters
    ----------
    name : str
        Which work array; different names never share memory.
    shape : tuple of int
    dtype : numpy dtype

    Returns
    -------
    ndarray
        C-contiguous, uninitialised.
    """
    dtype = np.dtype(dtype)
    n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buffers = getattr(_local, "scratch", None)
    if buffers is None:
        buffers = _local.scratch = {}
    buf = buffers.get(name)
    if buf is None or buf.nbytes < n_bytes:
        # 64-byte aligned, as numpy's own large allocations are
        buf = buffers[name] = np.empty(n_bytes + 64, dtype=np.uint8)
    offset = (-buf.ctypes.data) % 64
    return buf[offset:offset + n_bytes].view(dtype).reshape(shape)
