"""dkrp._threading: per-thread work arrays, which the transforms keep their temporaries
in (a fresh multi-MiB array per row block costs a page fault per 4 KiB in a Dask
worker, where distributed's MALLOC_TRIM_THRESHOLD_ makes glibc map and unmap every
such block). That the transforms use them is tested with each transform, by its peak
allocation (test_polynomial.py, test_fourier.py)."""

from __future__ import annotations

import threading

import numpy as np

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

