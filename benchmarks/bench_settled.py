"""What a write that raises only once none of its tasks runs costs (``dkrp._settled``).

``write_features`` on dask's threaded scheduler runs its chunk tasks through
:func:`dkrp._settled.compute_settled`, which makes a thread pool of its own per run (so that a
failed run can drain it before raising) instead of reusing dask's. This times a run that
succeeds, the common case, both ways in one process, alternating (the machine is shared):
``compute_settled`` as shipped, and plain ``dask.compute`` put in its place for the
comparison. Input: 200,000 × 54 float64 rows in 20,000-row chunks, KRP g=2, k=500, p=1000.

Usage::

    python benchmarks/bench_settled.py                  # about a minute on 2 cores
    python benchmarks/bench_settled.py --write-results  # and record it in RESULTS.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from unittest import mock

import dask
import dask.array as da
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, emit, interleaved  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=12)
    p.add_argument("--write-results", action="store_true")
    args = p.parse_args(argv)

    from dkrp import PolynomialRandomProjection
    from dkrp.feature_store import tasks, write_features

    X = np.random.default_rng(0).standard_normal((args.rows, 54))
    est = PolynomialRandomProjection(n_components=500, n_hyperplanes=1000,
                                     random_state=0).fit_n_features(54)
    def run():
        with tempfile.TemporaryDirectory(prefix="bench_settled-") as d:
            write_features(da.from_array(X, chunks=(20_000, 54)), est, Path(d) / "f.zarr",
                           progress=False)

    def plain(*tasks_, scheduler=None):
        return dask.compute(*tasks_, scheduler=scheduler)

    def run_plain():
        with mock.patch.object(tasks, "compute_settled", plain):
            run()

    run()  # warm: the compiled kernels, the first pages
    settled, base = interleaved([run, run_plain], args.repeats)
    med_s, med_p = float(np.median(settled)), float(np.median(base))
    body = "\n".join([
        "| write_features, dask threads | median s | min s | ratio to plain |",
        "|---|---:|---:|---:|",
        f"| `compute_settled` (own pool per run) | {med_s:.3f} | {min(settled):.3f} | "
        f"{med_s / med_p:.3f} |",
        f"| plain `dask.compute` (dask's pool) | {med_p:.3f} | {min(base):.3f} | 1.000 |",
        "",
        f"{args.rows:,} × 54 float64, 20,000-row chunks, KRP g=2 k=500 p=1000, "
        f"{args.repeats} alternating runs each.",
    ])
    emit("bench_settled", "Failed writes that settle: the cost on a run that succeeds",
         body, command_line("bench_settled.py", p, args), args.write_results)


if __name__ == "__main__":
    main()
