r"""The MNIST rows of the KRP paper's Tables 3-4 that differ: one protocol factor at a time.

``results/REPRODUCTION.md`` marks six MNIST rows "differs" (issue 30, item 4): Table 4's
Nyström k = 1500 (ours 97.84, paper 97.67) and KG-RP (ours 0.3-0.4 points above), KRP
Gaussian k = 2000, p = 244, t = 1 (ours 0.26 below), and Table 3's Nyström distortion at
g = 3, k = 1000 (ours 0.1839, paper 0.187 ± 0.001). The paper says only that its linear
SVM is liblinear's, with C = 0.5 on raw pixels; ``dkrp experiment classification``
standardises the features and picks C from {0.001, 0.01, 0.1} by 3-fold CV on 20,000
rows (it chose 0.01 for these maps). This script measures:

``svm``
    Each Table 4 row's map (seed 0, the experiment's ``make_map``), fitted on the 60,000
    training digits (pixels x/127.5 - 1) and scored on the 10,000 test digits by the
    experiment's linear SVM (``PrimalLinearSVC``, liblinear's problem) under: the
    experiment's protocol (standardised, C = 0.01); standardised with the grid's other
    values C = 0.001 and 0.1; and unstandardised features with the paper's raw-pixel
    C = 0.5 (liblinear on the features as the map gives them).
``distortion``
    Table 3's Nyström (g = 3, k = 1000): the distortion of three map seeds on ten
    draws of 500 evaluation rows (the experiment uses one draw, seed 2018). The paper's
    ± is over its ten runs of the map; the spread over the evaluation rows is a part of
    the setup the paper does not fix.

Writes ``runs.csv`` (one row per measurement, written as it is done) and ``README.md`` to
``--out``. About 15 minutes on two cores (``svm``: 12 fits of about a minute).

Run from the repository root::

    python benchmarks/mnist_protocol.py --out results/mnist-protocol
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
from _common import machine_cores

#: The Table 4 rows that differ: (method, k, p, t) -> the paper's accuracy (%)
TABLE4 = {("nystroem", 1500, None, None): 97.67, ("kg-rp", 1500, 488, 10): 96.15,
          ("kg-rp", 1500, 488, 1): 95.95, ("krp-gaussian", 2000, 244, 1): 97.20}
#: (name, standardise, C)
SVM_FACTORS = [("experiment: standardised, C = 0.01", True, 0.01),
               ("standardised, C = 0.001", True, 0.001),
               ("standardised, C = 0.1", True, 0.1),
               ("unstandardised, C = 0.5 (the paper's raw-pixel C)", False, 0.5)]
TABLE3_PAPER = (0.187, 0.001)
FIELDS = ["part", "method", "k", "p", "t", "seed", "factor", "standardize", "C",
          "eval_seed", "accuracy", "distortion", "converged", "seconds", "machine"]


def _key(row):
    """What a row measured (a rerun skips rows whose key is already in runs.csv)."""
    return tuple(str(row.get(f, "")) for f in ("part", "method", "k", "p", "t", "factor",
                                               "eval_seed", "seed"))


def svm_rows(split, machine, done=frozenset(), factors=None):
    """Yield one row per (Table 4 map, SVM factor) not in ``done`` (keys of :func:`_key`)."""
    from dkrp.evaluation import linear_svm_accuracy
    from dkrp.experiments._maps import make_map

    for (method, k, p, t) in TABLE4:
        todo = [(name, standardize, C) for name, standardize, C in SVM_FACTORS
                if (factors is None or standardize or C in factors)
                and _key({"part": "svm", "method": method, "k": k, "p": p or "",
                          "t": t or "", "factor": name, "seed": 0}) not in done]
        if not todo:
            continue
        projector = make_map(method, degree=2, k=k, p=p, t=t, seed=0).fit(split.X_train)
        Z_train = projector.transform(split.X_train).astype(np.float32)
        Z_test = projector.transform(split.X_test).astype(np.float32)
        for name, standardize, C in todo:
            start = time.perf_counter()
            fit = linear_svm_accuracy(Z_train, split.y_train, Z_test, split.y_test, C=C,
                                      standardize=standardize, dual=False,
                                      solver="primal-newton")
            yield {"part": "svm", "method": method, "k": k, "p": p or "", "t": t or "",
                   "seed": 0, "factor": name, "standardize": standardize, "C": C,
                   "accuracy": 100 * fit["accuracy"], "converged": fit["converged"],
                   "seconds": time.perf_counter() - start, "machine": machine}


def distortion_rows(split, machine, done=frozenset(), factors=None,
                    eval_seeds=range(2018, 2028), map_seeds=range(3)):
    """Yield Table 3's Nyström distortion per (map seed, evaluation-row draw) not in ``done``."""
    from dkrp.experiments._data import subsample
    from dkrp.experiments._maps import make_map
    from dkrp.metrics import distance_distortion

    for eval_seed in eval_seeds:
        X_eval, _ = subsample(split.X_test, split.y_test, 500, seed=eval_seed)
        for seed in map_seeds:
            if _key({"part": "distortion", "method": "nystroem", "k": 1000, "seed": seed,
                     "factor": "evaluation rows drawn by eval_seed",
                     "eval_seed": eval_seed}) in done:
                continue
            start = time.perf_counter()
            projector = make_map("nystroem", degree=3, k=1000, seed=seed).fit(split.X_train)
            value = float(distance_distortion(X_eval, projector.transform(X_eval), degree=3))
            yield {"part": "distortion", "method": "nystroem", "k": 1000, "seed": seed,
                   "factor": "evaluation rows drawn by eval_seed", "eval_seed": eval_seed,
                   "distortion": value, "seconds": time.perf_counter() - start,
                   "machine": machine}


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def readme(rows):
    """The README's text from the measured rows."""
    lines = ["# MNIST, the KRP paper's Tables 3-4: the rows that differ, one factor at a time",
             "", "Made by `python benchmarks/mnist_protocol.py` (its docstring says what "
             f"each part measures) on {rows[0]['machine']}. Every figure below is a row "
             "of `runs.csv`.", ""]
    svm = [r for r in rows if r["part"] == "svm"]
    verdicts = []
    if svm:
        lines += ["## Table 4: test accuracy (%) of the linear SVM, map seed 0", "",
                  "| map | paper | " + " | ".join(f[0] for f in SVM_FACTORS) + " |",
                  "|---|---:|" + "---:|" * len(SVM_FACTORS)]
        for (method, k, p, t), paper in TABLE4.items():
            cells = []
            for name, _, _ in SVM_FACTORS:
                hit = [r for r in svm if r["method"] == method and int(r["k"]) == k
                       and r["p"] == str(p or "") and r["t"] == str(t or "")
                       and r["factor"] == name]
                cells.append(f"{float(hit[0]['accuracy']):.2f}" if hit else "")
            label = f"{method} k={k}" + (f" p={p} t={t}" if p else "")
            lines.append(f"| {label} | {paper:.2f} | " + " | ".join(cells) + " |")
            values = [float(c) for c in cells if c]
            if values:
                inside = min(values) <= paper <= max(values)
                verdicts.append(f"- {label}: the factors span {min(values):.2f} to "
                                f"{max(values):.2f}; the paper's {paper:.2f} is "
                                + ("inside: the SVM's C (and scaling) accounts for the gap."
                                   if inside else
                                   "outside: the SVM's C does not account for the gap."))
        lines += ["", "The paper does not give C for mapped features; where its figure lies "
                  "inside the span that C moves the accuracy over, C is a measured cause:", "",
                  *verdicts, ""]
    dist = [r for r in rows if r["part"] == "distortion"]
    if dist:
        values = np.array([float(r["distortion"]) for r in dist])
        by_eval = {}
        for r in dist:
            by_eval.setdefault(r["eval_seed"], []).append(float(r["distortion"]))
        means = np.array([np.mean(v) for v in by_eval.values()])
        within = np.mean([np.std(v, ddof=1) for v in by_eval.values() if len(v) > 1])
        lines += ["## Table 3: Nyström, g = 3, k = 1000 (paper "
                  f"{TABLE3_PAPER[0]:.3f} ± {TABLE3_PAPER[1]:.3f})", "",
                  f"- {len(by_eval)} draws of 500 evaluation rows x "
                  f"{len(dist) // len(by_eval)} map seeds: distortion {values.min():.4f} to "
                  f"{values.max():.4f}.",
                  f"- Mean over map seeds, per draw: {means.min():.4f} to {means.max():.4f} "
                  f"(sd over draws {np.std(means, ddof=1):.4f}); the experiment's draw "
                  f"(2018): {np.mean(by_eval.get('2018', [np.nan])):.4f}.",
                  f"- sd over map seeds within a draw (what a run's ± measures): "
                  f"{within:.4f}.", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("results/mnist-protocol"),
                        help="folder for runs.csv and README.md")
    parser.add_argument("--parts", nargs="+", choices=["svm", "distortion"],
                        default=["distortion", "svm"], help="what to measure")
    parser.add_argument("--from-csv", action="store_true",
                        help="only rewrite README.md from the folder's runs.csv")
    parser.add_argument("--skip-unstandardised", action="store_true",
                        help="leave out the unstandardised fits (minutes each: liblinear's "
                             "problem on raw map features is ill-conditioned)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "runs.csv"
    if not args.from_csv:
        from dkrp.experiments._data import load_split

        split, machine = load_split("mnist"), machine_cores()
        done = {_key(r) for r in _read(path)} if path.exists() else set()
        factors = () if args.skip_unstandardised else None
        with open(path, "a", newline="") as f:  # resumes: measured rows are kept
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            if not done:
                writer.writeheader()
            for part in args.parts:
                rows = distortion_rows if part == "distortion" else svm_rows
                for row in rows(split, machine, done, factors):
                    writer.writerow(row)
                    f.flush()
                    print({k: v for k, v in row.items() if k != "machine"}, flush=True)
    (args.out / "README.md").write_text(readme(_read(path)))
    print(f"wrote {args.out / 'README.md'}")


if __name__ == "__main__":
    main()
