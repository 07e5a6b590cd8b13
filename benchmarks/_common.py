"""Shared helpers for the benchmarks: timing, machine description, the MNIST-shaped input."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np

from dkrp.datasets import data_dir  # the one data-folder lookup (DKRP_DATA_DIR, ../shared/data)
from dkrp.io import read_idx  # the one IDX parser

REPO_ROOT = Path(__file__).resolve().parents[1]


def mnist_train(n_rows=60000):
    """The real MNIST training images scaled to [-1, 1], or a random stand-in (said so)."""
    path = data_dir() / "mnist" / "train-images-idx3-ubyte.gz"
    if path.exists():
        X = read_idx(path, expected_magic=2051).reshape(-1, 784)[:n_rows]
        return X / 127.5 - 1.0, "MNIST train images (x/127.5 - 1)"
    rng = np.random.default_rng(0)
    return rng.uniform(-1, 1, (n_rows, 784)), "uniform random stand-in (MNIST not found)"


def best_of(fn, repeats=3):
    """Minimum wall time of ``repeats`` calls (the least-disturbed run)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        del result
    return min(times)


def machine_description() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from threadpoolctl import threadpool_info

        blas = ", ".join(
            f"{i['internal_api']} {i.get('version', '')} ({i.get('architecture', '')}, "
            f"{i['num_threads']} threads)"
            for i in threadpool_info()
            if i["user_api"] == "blas"
        )
    except Exception:  # pragma: no cover - informative only
        blas = "unknown BLAS"
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = float("nan")
    return (
        f"{cpu}; {len(os.sched_getaffinity(0))} cores usable; {mem:.0f} GiB RAM; "
        f"Python {platform.python_version()}; numpy {np.__version__}; BLAS: {blas}"
    )


def emit(text: str, write_results: bool) -> None:
    """Print a results section and, when asked, append it to ``benchmarks/RESULTS.md``."""
    print("\n" + text)
    if write_results:
        path = Path(__file__).with_name("RESULTS.md")
        with path.open("a") as f:
            f.write("\n" + text)
        print(f"appended to {path}")
