"""Time the KRP transform against its floor and scikit-learn's peers, in one run.

The floor no implementation can beat is the bare GEMM ``X @ S.T`` (n × p) plus
allocating and writing the n × k output once. Peers at the same output dimension
k: scikit-learn's PolynomialCountSketch(degree=2), Nystroem(kernel="poly",
degree=2) and RBFSampler, and dkrp's RandomFourierFeatures. Every figure is the
best of ``--repeats`` runs in the same process; ratios are to the floor of the same
dtype and thread setting.

Usage::

    python benchmarks/bench_transform.py                 # MNIST shape, g=2 p=488 k=1500
    python benchmarks/bench_transform.py --rows 20000 --write-results
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_of, command_line, emit, mnist_train  # noqa: E402

import dkrp  # noqa: E402
from dkrp._threading import limit_threads  # noqa: E402


def floor(Xd, S, n_components):
    """The floor: the bare GEMM ``X @ S.T`` plus allocating and writing the n × k output."""
    P = Xd @ S.T
    out = np.empty((Xd.shape[0], n_components), dtype=Xd.dtype)
    out.fill(1.0)
    return P, out


def timed(fn, limit, repeats):
    """Best of ``repeats`` calls of ``fn``, under a thread limit when ``limit`` is not None."""
    if limit is None:
        return best_of(fn, repeats)
    with threadpool_limits(limits=limit), limit_threads(limit):
        return best_of(fn, repeats)


def run(X, degree, n_hyperplanes, n_components, n_terms, repeats):
    from sklearn.kernel_approximation import Nystroem, PolynomialCountSketch, RBFSampler

    rows = []
    for dtype in (np.float32, np.float64):
        Xd = np.ascontiguousarray(X, dtype=dtype)
        krp = dkrp.PolynomialRandomProjection(
            degree=degree, n_components=n_components, n_hyperplanes=n_hyperplanes,
            n_terms=n_terms, random_state=0,
        ).fit(Xd[:10])
        S = np.ascontiguousarray(krp.hyperplanes_, dtype=dtype)
        krp.transform(Xd[:100])  # compile the gather kernel outside the timings
        rff = dkrp.RandomFourierFeatures(gamma=1.0 / 784, n_components=n_components,
                                         random_state=0).fit(Xd[:10])
        pcs = PolynomialCountSketch(degree=2, n_components=n_components,
                                    random_state=0).fit(Xd[:10])
        nys = Nystroem(kernel="poly", degree=2, gamma=1.0, coef0=0, n_components=n_components,
                       random_state=0).fit(Xd[: max(n_components, 2000)])
        rbf = RBFSampler(gamma=1.0 / 784, n_components=n_components, random_state=0).fit(Xd[:10])
        for threads_label, limit in (("all", None), ("1", 1)):
            t_floor = timed(partial(floor, Xd, S, n_components), limit, repeats)
            entries = [("floor: GEMM + write output", t_floor)] + [
                (name, timed(partial(est.transform, Xd), limit, repeats))
                for name, est in (
                    ("dkrp KRP transform", krp),
                    ("dkrp RFF transform", rff),
                    ("sklearn PolynomialCountSketch", pcs),
                    ("sklearn Nystroem(poly)", nys),
                    ("sklearn RBFSampler", rbf),
                )
            ]
            for name, t in entries:
                rows.append((np.dtype(dtype).name, threads_label, name, t, t / t_floor))
    return rows


def format_table(rows):
    lines = [
        "| dtype | threads | method | seconds | × floor |",
        "|---|---|---|---:|---:|",
    ]
    for dtype, threads, name, t, ratio in rows:
        lines.append(f"| {dtype} | {threads} | {name} | {t:.3f} | {ratio:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=60000)
    parser.add_argument("--degree", type=int, default=2)
    parser.add_argument("--n-hyperplanes", type=int, default=488)
    parser.add_argument("--n-components", type=int, default=1500)
    parser.add_argument("--n-terms", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write-results", action="store_true",
                        help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    X, source = mnist_train(args.rows)
    rows = run(X, args.degree, args.n_hyperplanes, args.n_components, args.n_terms, args.repeats)
    table = format_table(rows)
    krp = {(r[0], r[1]): r for r in rows if r[2] == "dkrp KRP transform"}
    pcs = {(r[0], r[1]): r for r in rows if r[2] == "sklearn PolynomialCountSketch"}
    summary = [
        f"- {dt}, threads={th}: KRP = {krp[(dt, th)][4]:.2f}× floor; "
        f"PolynomialCountSketch / KRP = {pcs[(dt, th)][3] / krp[(dt, th)][3]:.1f}×"
        for dt, th in krp
    ]
    title = (
        f"KRP transform, {X.shape[0]:,} × {X.shape[1]} ({source}), g={args.degree}, "
        f"p={args.n_hyperplanes}, k={args.n_components}, t={args.n_terms}"
    )
    body = (
        f"Each figure: best of {args.repeats} runs in one process; × floor is to the floor of "
        "the same dtype and thread setting.\n\n" + table + "\n\n" + "\n".join(summary)
    )
    emit("bench_transform", title, body, command_line("bench_transform.py", parser, args),
         args.write_results)


if __name__ == "__main__":
    main()
