"""Time random Fourier features against their floor and scikit-learn's RBFSampler.

The floor is the bare GEMM ``X @ W.T`` (n × k) plus allocating and writing the n × k
output once (as ``bench_transform.py``). For RFF the GEMM's own output is n × k, so the
bare GEMM alone is a stricter floor (an in-place map writes nothing else); both are
timed. Timed in the same run, interleaved (``_common.interleaved``: each round
runs every method, in a rotated order), median of ``--repeats`` rounds, per dtype and
thread setting:

* the floor;
* the GEMM alone in dkrp's row blocks (``fourier.ROW_BLOCK`` rows, one BLAS thread per
  block, blocks on the thread pool, as ``transform`` runs it so that the bits do not
  depend on the number of threads) into a new n × k array: what RFF would cost with a
  cosine of zero cost, so RBFSampler / this time bounds the ratio dkrp can reach;
* dkrp's RFF with the compiled cosine (``cosine_ = "dkrp2"``, every new fit: float32
  polynomials in float32 arithmetic);
* dkrp's RFF with the compiled cosine's version 1 (``cosine_ = "dkrp"``, specs written
  before version 2: float32 evaluated in float64; float64 is the same in both);
* dkrp's RFF with numpy's cosine (``cosine_ = "numpy"``, specs written before it);
* scikit-learn's RBFSampler (same gamma and k);
* dkrp's Spherical Random Features (degree 10, scale 4) at the same k: the same GEMM and
  cosine after normalising the rows (issue 12: within 1.2× of RFF).

Usage::

    python benchmarks/bench_rff.py                  # MNIST shape 60,000 × 784, k = 1500
    python benchmarks/bench_rff.py --write-results
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
from functools import partial
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, emit, interleaved, mnist_train  # noqa: E402

import dkrp  # noqa: E402
from dkrp._threading import limit_threads, run_row_blocks  # noqa: E402
from dkrp.features.fourier import ROW_BLOCK  # noqa: E402

METHODS = ("floor: GEMM + write output", "bare GEMM X @ W.T", "GEMM in dkrp's row blocks",
           "dkrp RFF (compiled cosine)", "dkrp RFF (numpy cosine)", "sklearn RBFSampler",
           "dkrp SRF (p=10, a=4)", "dkrp RFF (compiled cosine, version 1)")
#: The issue-15 targets for RBFSampler / RFF, by dtype.
TARGETS = {"float32": 1.0, "float64": 1.5}


def floor(Xd, W, n_components):
    """The floor: the bare GEMM ``X @ W.T`` plus allocating and writing the n × k output."""
    P = Xd @ W.T
    out = np.empty((Xd.shape[0], n_components), dtype=Xd.dtype)
    out.fill(1.0)
    return P, out


def blocked_gemm(Xd, W):
    """``X @ W.T`` in dkrp's row blocks, into a new array: RFF without its cosine."""
    out = np.empty((Xd.shape[0], W.shape[0]), dtype=Xd.dtype)

    def work(start, stop):
        np.matmul(Xd[start:stop], W.T, out=out[start:stop])

    run_row_blocks(Xd.shape[0], ROW_BLOCK, work)
    return out


def run(X, n_components, gamma, repeats, threads, pages="warm"):
    from sklearn.kernel_approximation import RBFSampler

    rows = []
    for dtype in (np.float32, np.float64):
        Xd = np.ascontiguousarray(X, dtype=dtype)
        rff = dkrp.RandomFourierFeatures(gamma=gamma, n_components=n_components,
                                         random_state=0).fit(Xd[:10])
        legacy = copy.deepcopy(rff)
        legacy.cosine_ = "numpy"
        version1 = copy.deepcopy(rff)
        version1.cosine_ = "dkrp"
        W = np.ascontiguousarray(rff.random_weights_, dtype=dtype)
        rbf = RBFSampler(gamma=gamma, n_components=n_components, random_state=0).fit(Xd[:10])
        srf = dkrp.SphericalRandomFeatures(degree=10, scale=4.0, n_components=n_components,
                                           random_state=0).fit(Xd[:10])
        for est in (rff, version1, srf):  # compile the kernels outside the timings
            est.transform(Xd[:100])
        fns = [partial(floor, Xd, W, n_components), partial(np.matmul, Xd, W.T),
               partial(blocked_gemm, Xd, W), partial(rff.transform, Xd),
               partial(legacy.transform, Xd), partial(rbf.transform, Xd),
               partial(srf.transform, Xd), partial(version1.transform, Xd)]
        # the floor allocates two n x k arrays, every other method one
        warm = 2 * Xd.shape[0] * n_components * Xd.itemsize if pages == "warm" else 0
        for label in threads:
            limit = None if label == "all" else int(label)
            if limit is None:
                times = interleaved(fns, repeats, warm)
            else:
                with threadpool_limits(limits=limit), limit_threads(limit):
                    times = interleaved(fns, repeats, warm)
            med = [statistics.median(t) for t in times]
            for name, t, ts in zip(METHODS, med, times, strict=True):
                rows.append((np.dtype(dtype).name, label, name, t, t / med[0], ts))
    return rows


def paired_ratio(numerator_runs, denominator_runs):
    """Median over rounds of the ratio of two methods' times in the same round."""
    return statistics.median(a / b for a, b in zip(numerator_runs, denominator_runs,
                                                   strict=True))


def format_table(rows):
    lines = ["| dtype | threads | method | median s | × floor | all runs (s) |",
             "|---|---|---|---:|---:|---|"]
    for dtype, threads, name, t, ratio, ts in rows:
        runs = " ".join(f"{x:.2f}" for x in ts)
        lines.append(f"| {dtype} | {threads} | {name} | {t:.3f} | {ratio:.2f} | {runs} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=60000)
    parser.add_argument("--n-components", type=int, default=1500)
    parser.add_argument("--gamma", type=float, default=1.0 / 784)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", default="all,1",
                        help="comma-separated thread settings: 'all' or a number")
    parser.add_argument("--pages", choices=("warm", "as-found"), default="warm",
                        help="warm: before each timed call, touch and free as many bytes as "
                        "the floor allocates (_common.warm_pages), so that no method pays "
                        "for pages the host took back; as-found: nothing")
    parser.add_argument("--write-results", action="store_true",
                        help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    X, source = mnist_train(args.rows)
    rows = run(X, args.n_components, args.gamma, args.repeats, args.threads.split(","),
               args.pages)
    by = {(r[0], r[1], r[2]): r[3] for r in rows}
    runs = {(r[0], r[1], r[2]): r[5] for r in rows}
    summary = []
    for dt in ("float32", "float64"):
        for th in args.threads.split(","):
            f, gemm, blocks, ours, old, rbf, srf, v1 = (by[(dt, th, m)] for m in METHODS)
            target = TARGETS[dt]
            paired_rbf, paired_srf = (
                paired_ratio(runs[(dt, th, a)], runs[(dt, th, b)])
                for a, b in ((METHODS[5], METHODS[3]), (METHODS[6], METHODS[3])))
            summary.append(
                f"- {dt}, threads={th}: RFF = {ours / f:.2f}× floor, {ours / gemm:.2f}× bare "
                f"GEMM, {ours / blocks:.2f}× its own blocked GEMM (numpy cosine "
                f"{old / f:.2f}× floor, {old / gemm:.2f}× GEMM; compiled cosine version 1 "
                f"{v1 / f:.2f}× floor); RBFSampler / RFF = "
                f"{rbf / ours:.2f}× (target ≥ {target:g}: "
                f"{'met' if rbf / ours >= target else 'not met'}; a cosine of zero cost "
                f"would reach {rbf / blocks:.2f}×, one unblocked GEMM {rbf / gemm:.2f}×); "
                f"SRF / RFF = {srf / ours:.2f}× "
                f"(target ≤ 1.2: {'met' if srf / ours <= 1.2 else 'not met'}); the same two "
                f"ratios taken within each round, then the median (a slow spell of the "
                f"machine falls on both sides of a ratio): RBFSampler / RFF {paired_rbf:.2f}×, "
                f"SRF / RFF {paired_srf:.2f}×")
    title = (f"RFF transform, {X.shape[0]:,} × {X.shape[1]} ({source}), "
             f"k={args.n_components}, gamma={args.gamma:.6g}")
    pages = ("Before each timed call, 2 × n × k × itemsize bytes were touched and freed "
             "(`_common.warm_pages`, untimed), so every method's output lands on pages the "
             "machine already backs: on this VM a page freed more than about a second "
             "earlier costs 1.5 to 6 ms per MiB on first touch against under 0.4 when warm "
             "(section `bench_memory`), which made earlier rounds bimodal."
             if args.pages == "warm" else
             "Pages as found (`--pages as-found`): an output landing on memory the host took "
             "back costs 1.5 to 6 ms per MiB more here (section `bench_memory`).")
    body = (f"Median of {args.repeats} interleaved rounds; × floor is to the floor of the "
            "same dtype and thread setting. " + pages + "\n\n" + format_table(rows) + "\n\n"
            + "\n".join(summary))
    emit("bench_rff", title, body, command_line("bench_rff.py", parser, args),
         args.write_results)


if __name__ == "__main__":
    main()
