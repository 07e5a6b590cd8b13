"""dkrp._threading: per-thread work arrays, which the transforms keep their temporaries
in (a fresh multi-MiB array per row block costs a page fault per 4 KiB in a Dask
worker, where distributed's MALLOC_TRIM_THRESHOLD_ makes glibc map and unmap every
such block). That the transforms use them is tested with each transform, by its peak
allocation (test_polynomial.py, test_fourier.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from dkrp._threading import scratch


def test_scratch_is_reused_by_its_thread_and_name_only():
    a = scratch("test.a", (4, 8), np.float64)
    assert a.shape == (4, 8) and a.dtype == np.float64 and a.flags.c_contiguous
    assert a.ctypes.data % 64 == 0
    again = scratch("test.a", (2, 8), np.float64)  # smaller: a view of the same memory
    assert np.shares_memory(a, again) and again.shape == (2, 8)
    assert scratch("test.a", (3, 5), np.float32).ctypes.data == a.ctypes.data
    other = scratch("test.b", (4, 8), np.float64)
    assert not np.shares_memory(a, other)
    grown = scratch("test.a", (400, 8), np.float64)  # larger: new memory, then kept
    assert grown.shape == (400, 8)
    assert np.shares_memory(grown, scratch("test.a", (4, 8), np.float64))
    seen = []
    t = threading.Thread(target=lambda: seen.append(scratch("test.a", (4, 8), np.float64)))
    t.start()
    t.join()
    assert not np.shares_memory(seen[0], grown)



def _blas_threads():
    from threadpoolctl import threadpool_info

    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_one_blas_thread_holds_in_any_thread_while_any_thread_needs_it():
    # BLAS's thread count is process-wide: threadpoolctl (3.8) lets only the first thread
    # that limited it change it later, so the limit must not go through its limiter; and
    # the first of two overlapping threads to leave must not restore it under the other
    import os

    from threadpoolctl import threadpool_limits

    from dkrp._threading import blas_one_thread

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: BLAS runs one thread anyway")
    with threadpool_limits(limits=2, user_api="blas"):  # this thread controls BLAS now
        assert _blas_threads() == {2}
        inside, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
        seen = {}

        def first():
            with blas_one_thread():
                seen["first"] = _blas_threads()
                inside.set()
                second_in.wait(10)
            first_out.set()

        def second():
            inside.wait(10)
            with blas_one_thread():
                second_in.set()
                first_out.wait(10)
                seen["second, after the first left"] = _blas_threads()

        threads = [threading.Thread(target=f) for f in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert seen == {"first": {1}, "second, after the first left": {1}}
        assert _blas_threads() == {2}  # restored by the last one out


def test_a_transform_in_another_thread_gives_the_bits_of_the_main_thread():
    # a Dask thread (local scheduler) or a user's thread: the same one-thread BLAS blocks
    import dkrp

    X = np.random.default_rng(5).uniform(-1, 1, (4500, 12)).astype(np.float32)
    maps = [dkrp.RandomFourierFeatures(n_components=64, random_state=0),
            dkrp.PCAProjector(n_components=8), dkrp.Nystroem(n_components=32, random_state=0)]
    for est in maps:
        est.fit(X)
        ref = est.transform(X)
        got = {}

        def run(i, est=est, got=got):
            got[i] = est.transform(X)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert all(z.tobytes() == ref.tobytes() for z in got.values()), type(est).__name__



_FIRST_CALL = """
import numpy as np
from numba.core.typing.typeof import typeof_impl
from dkrp.features._gather import gather_products
before = len(typeof_impl.registry)
gather_products(np.ones((4, 5)), np.zeros((3, 4), dtype=np.int64), 2, 1.0, np.zeros((4, 3)))
print(before, len(typeof_impl.registry))
"""


def test_a_kernels_first_call_registers_nothing_with_numba_typeof(tmp_path):
    # A first compilation that imports numba's lazily loaded typing modules registers
    # types with numba.typeof while other threads type their arguments, and a thread
    # fails with "dictionary changed size during iteration" (a featurize partition
    # failed so in CI). dkrp._jit loads them at import; fresh processes show it, one
    # compiling the kernel (an empty cache, as on a fresh clone) and one loading it.
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    for how in ("compiled", "loaded from numba's cache"):
        before, after = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env,
                                       capture_output=True, text=True,
                                       check=True).stdout.split()
        assert before == after, f"numba.typeof's registry grew on a first call ({how})"
