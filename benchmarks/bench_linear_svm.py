"""PrimalLinearSVC against scikit-learn's LinearSVC on the same random features, one run.

The classification experiment trains a primal linear SVM on standardised KRP features
of MNIST (the KRP paper's Table 4: g = 2, k = 1500, p = 488). This fits both solvers
of that problem (squared hinge, L2, one-vs-rest, ``C``) on the same ``--rows`` training
rows, in the order ``LinearSVC(dual=False)`` (liblinear) then ``PrimalLinearSVC`` in
float64 and in float32 (``--repeats`` rounds, interleaved), and prints their times, the
ratio, each one's objective summed over the classes and its test accuracy on MNIST's
10,000 test digits. Speed is never asserted in tests; ``tests/test_linear_svm.py``
checks that both reach the same minimiser.

Usage::

    python benchmarks/bench_linear_svm.py
    python benchmarks/bench_linear_svm.py --rows 60000 --repeats 1 --write-results
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, emit, interleaved  # noqa: E402


def features(rows, k, p, seed=0):
    """Standardised KRP features of ``rows`` MNIST training digits and of the test digits."""
    from sklearn.preprocessing import StandardScaler

    from dkrp.experiments._data import load_split
    from dkrp.experiments._maps import make_map

    split = load_split("mnist")
    X, y = split.X_train[:rows], split.y_train[:rows]
    projector = make_map("krp-gaussian", degree=2, k=k, p=p, t=1, seed=seed).fit(X)
    scaler = StandardScaler().fit(projector.transform(X))
    return (scaler.transform(projector.transform(X)), y,
            scaler.transform(projector.transform(split.X_test)), split.y_test)


def objective(Z, y, model, C):
    """Sum over the one-vs-rest problems of ½(‖w‖² + b²) + C Σ max(0, 1 − y(w·z + b))²."""
    total = 0.0
    classes = model.classes_
    problems = [classes[1]] if len(classes) == 2 else classes
    for i, c in enumerate(problems):
        w = np.asarray(model.coef_[i], dtype=np.float64)
        b = float(model.intercept_[i])
        y_pm = np.where(y == c, 1.0, -1.0)
        slack = np.maximum(0.0, 1.0 - y_pm * (Z @ w + b))
        total += 0.5 * (w @ w + b * b) + C * (slack ** 2).sum()
    return total


def main(argv=None):
    from sklearn.svm import LinearSVC

    from dkrp.linear_svm import PrimalLinearSVC

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000, help="MNIST training rows")
    parser.add_argument("--k", type=int, default=1500, help="KRP features")
    parser.add_argument("--p", type=int, default=488, help="KRP hyperplanes")
    parser.add_argument("--C", type=float, default=0.01,
                        help="the C the experiment's cross-validation chose on MNIST")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--write-results", action="store_true",
                        help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)

    Z, y, Zt, yt = features(args.rows, args.k, args.p)
    Z32, Zt32 = Z.astype(np.float32), Zt.astype(np.float32)
    fitted = {}

    def fit(name, make, data):
        def run():
            fitted[name] = (make().fit(data, y), data)
        return run

    solvers = [
        ("LinearSVC(dual=False), float64 (liblinear)",
         lambda: LinearSVC(C=args.C, dual=False), Z),
        ("PrimalLinearSVC, float64", lambda: PrimalLinearSVC(C=args.C), Z),
        ("PrimalLinearSVC, float32", lambda: PrimalLinearSVC(C=args.C), Z32),
    ]
    times = interleaved([fit(n, m, d) for n, m, d in solvers], args.repeats)
    base = float(np.median(times[0]))
    lines = [
        f"MNIST: {args.rows:,} training rows, KRP g=2 k={args.k} p={args.p} t=1 features "
        f"standardised; C = {args.C}; test accuracy on the 10,000 test digits. Objective: "
        "summed over the 10 one-vs-rest problems, in float64. ratio = LinearSVC's median "
        "time / this solver's.",
        "",
        "| solver | fit s (median) | all runs s | ratio | Newton iterations | CG steps | "
        "objective | test accuracy % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (name, _, _), runs in zip(solvers, times, strict=True):
        model, data = fitted[name]
        test = Zt32 if data.dtype == np.float32 else Zt
        accuracy = 100 * float((model.predict(test) == yt).mean())
        newton = getattr(model, "n_iter_", None)
        newton = int(np.max(newton)) if newton is not None else "-"
        cg = getattr(model, "n_cg_iter_", "-")
        lines.append(f"| {name} | {np.median(runs):.1f} | "
                     f"{' '.join(f'{t:.1f}' for t in runs)} | {base / np.median(runs):.2f} | "
                     f"{newton} | {cg} | {objective(Z, y, model, args.C):.6f} | "
                     f"{accuracy:.2f} |")
    lines += ["", "liblinear keeps a dense matrix as one (index, value) node per entry and "
              "multiplies without BLAS; PrimalLinearSVC's work is matrix products over the "
              "features (two per conjugate-gradient step, all classes at once)."]
    emit("bench_linear_svm", "PrimalLinearSVC vs LinearSVC on MNIST KRP features",
         "\n".join(lines), command_line("bench_linear_svm.py", parser, args),
         args.write_results)


if __name__ == "__main__":
    main()
