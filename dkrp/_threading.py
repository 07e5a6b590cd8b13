"""In-process parallelism for transforms: row blocks spread over a thread pool.

Each thread runs a single-threaded GEMM followed by the compiled gather on the
same row block while it is still in cache. This beats a multi-threaded GEMM
followed by a multi-threaded gather, whose thread pools (OpenBLAS, numba) spin
against each other, and it makes every block's bits independent of how many
threads run: a block is always computed by one thread with one-thread BLAS.

The thread count is ``DKRP_NUM_THREADS`` if set, else the CPUs this process may
use (in a SLURM job, its allocation's: :func:`dkrp._resources.available_cpus`);
:func:`limit_threads` overrides it for the calling thread (the distributed path uses it
to give each Dask task its worker's share: ``DKRP_NUM_THREADS`` divided among the
worker's task threads, or one thread per task when it is not set).

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

__all__ = ["configured_threads", "num_threads", "limit_threads", "map_row_blocks",
           "run_row_blocks", "scratch", "ROW_BLOCK"]

#: Rows per block of :func:`map_row_blocks`. It divides the feature store's chunks and
#: pipelined steps (multiples of 2048 rows), so every row goes through the same BLAS
#: calls whichever way the caller split the rows: a BLAS may round a GEMM's row by how
#: many rows the call has (OpenBLAS's Haswell sgemm and dgemm do).
ROW_BLOCK = 2048

_local = threading.local()
_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()
_controller: ThreadpoolController | None = None


_blas_lock = threading.Lock()
_blas_users = 0
_blas_restore: list = []


def _set_blas_threads(lib, n: int) -> None:
    """Set a BLAS library's thread count, process-wide, from whichever thread calls.

    threadpoolctl 3.8 lets only one "controlling" thread (the first that set a limit)
    change a pthreads OpenBLAS's count and silently ignores the others: a Dask thread
    or a user's thread would then run its blocks with every core, and OpenBLAS's
    Haswell sgemm gives a row other bits when a call's rows are split among threads.
    ``_real_set_num_threads`` is the library's own setter (absent before 3.8).
    """
    setter = getattr(lib, "_real_set_num_threads", None) or lib.set_num_threads
    setter(n)


@contextlib.contextmanager
def blas_one_thread():
    """Limit BLAS to one thread while any thread of the process is inside this context.

    BLAS's thread count is global to the process, so the limit is counted: the first
    thread in sets it, the last one out restores it (a limiter entered and left by two
    threads at once would restore the count while the other still computes). The
    controller is built once: it is slow.
    """
    global _controller, _blas_users
    with _blas_lock:
        if _blas_users == 0:
            if _controller is None:
                _controller = ThreadpoolController()
            for lib in _controller.lib_controllers:
                if lib.user_api == "blas":
                    _blas_restore.append((lib, lib.num_threads))
                    _set_blas_threads(lib, 1)
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                while _blas_restore:
                    lib, n = _blas_restore.pop()
                    _set_blas_threads(lib, n)


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
    from ._resources import available_cpus

    return available_cpus()


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
    with blas_one_thread():
        if n <= 1:
            for start, stop in blocks:
                work(start, stop)
            return
        futures = [_pool(n).submit(work, start, stop) for start, stop in blocks]
        for f in futures:
            f.result()


def map_row_blocks(X, n_columns: int, dtype, fn, block_rows: int = ROW_BLOCK) -> np.ndarray:
    """``fn`` of consecutive row blocks of ``X``, stacked: ``fn(X[a:b])`` is rows ``a:b``.

    The blocks run as :func:`run_row_blocks` runs them (one BLAS thread each), so a
    row's bits depend neither on the thread count nor on the rows passed with it.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n, d)
    n_columns : int
    dtype : numpy dtype
        Of the output (``fn``'s result is cast to it).
    fn : callable
        ``fn(rows)`` returns an array of shape ``(rows.shape[0], n_columns)``.
    block_rows : int, default=ROW_BLOCK

    Returns
    -------
    ndarray of shape (n, n_columns)
    """
    out = np.empty((X.shape[0], n_columns), dtype=dtype)

    def work(start, stop):
        out[start:stop] = fn(X[start:stop])

    run_row_blocks(X.shape[0], block_rows, work)
    return out


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
