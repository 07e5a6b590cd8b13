"""dkrp._threading: per-thread work arrays, and the transforms that keep their
temporaries in them (a fresh multi-MiB array per row block costs a page fault per
4 KiB in a Dask worker, where distributed's MALLOC_TRIM_THRESHOLD_ makes glibc map
and unmap every such block)."""

from __future__ import annotations

import threading

import numpy as np
from conftest import peak_allocation

import dkrp
from dkrp._threading import limit_threads, scratch


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


def test_krp_transform_allocates_no_projection_block_per_row_block():
    # p = 4096 hyperplanes: one 512-row block of float64 projections is 16 MiB, against
    # a 0.3 MiB output; numpy reports its allocations to tracemalloc
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8 * 512, 20))
    krp = dkrp.PolynomialRandomProjection(n_components=10, n_hyperplanes=4096,
                                          random_state=0).fit(X)
    block_bytes = 512 * 4096 * 8
    with limit_threads(1):  # this thread runs every block, so its work array serves all
        first = krp.transform(X)  # builds the caches and the work array
        second, peak = peak_allocation(lambda: krp.transform(X))
    assert np.array_equal(first, second)
    assert peak < block_bytes / 4, f"{peak} bytes at peak: a projection block was allocated"
