"""Why the exact polynomial SVM's F1 on w8a is far below the KRP paper's: one factor at a time.

The KRP paper (López-Sánchez et al., Pattern Recognition 2018, §4.3.2) reports an F1 of
0.9020 for a degree-2 polynomial-kernel SVM (C = 1) trained on w8a's 49,749 training rows
and tested on the 14,951 rows of ``w8a.t``. ``w8a.t`` is not available here, so dkrp's
classification experiment splits the training file 80/20 (stratified, seed 2018) and
gets about 0.75 (``results/classification-w8a``). This script measures the exact SVM's
F1 (``sklearn.svm.SVC``) while changing one protocol factor at a time from a baseline:

* baseline: the paper's kernel ``<x, y>^2`` (``kernel="poly", degree=2, gamma=1,
  coef0=0``), ``C = 1``, every row of the training part (39,799), the experiment's split
  (seed 2018), decision threshold 0, F1 of class +1;
* ``gamma``: 1, ``1 / n_features`` (scikit-learn's old ``"auto"``) and ``"scale"``
  (``1 / (n_features * X.var())``, scikit-learn's default since 0.22);
* ``coef0``: 0 (homogeneous, the paper's) and 1 (inhomogeneous);
* ``C``: a grid around the paper's ``C = 1``;
* ``n_train``: subsamples (stratified, seed 0) of the training part, 10,000 being
  what the experiment's ``full`` profile uses;
* ``split``: other stratified 80/20 splits of the training file (the spread of F1 between
  held-out sets, since ``w8a.t`` is missing);
* ``rbf``: the paper's Gaussian SVM (C = 200, gamma = 0.05), for comparison;
* ``resubstitution``: the paper's polynomial and Gaussian SVMs fitted on all 49,749 rows
  of the file and scored on those same rows (training-set F1, not a held-out figure);
* ``krp``: the experiment's KRP (Gaussian, k = 2000, p = 446, t = 10) with its linear
  SVM (C = 0.01, its cross-validated choice, and C = 1), held out and by resubstitution;
* ``linear``: the linear SVM on raw features (C = 1), held out and by resubstitution.

Every fitted model is also scored with the other F1 definitions (macro, weighted, the F1
of class -1) and with the decision threshold moved to the value that maximises the test
F1 of class +1 (an oracle: an upper bound on what any threshold could give, not a
protocol). The ``duplicates`` factor fits nothing: it counts rows of the training file
(and of each split's held-out part) whose 300 binary features are identical while their
labels disagree (4,203 rows have no feature set at all), and the largest F1 of class +1
that any function of the features can reach on those rows, an upper bound for every
classifier; it writes ``duplicates.csv`` next to ``--out``.

Each run appends one row to ``--out`` (CSV) as soon as it is done, so a long session
keeps its partial results.

Usage::

    python benchmarks/w8a_protocol.py --factors baseline --n-train 10000
    python benchmarks/w8a_protocol.py --factors baseline gamma coef0 C n_train split
    python benchmarks/w8a_protocol.py --factors duplicates
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import platform
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "results" / "w8a-protocol" / "runs.csv"
FACTORS = ("baseline", "gamma", "coef0", "C", "n_train", "split", "rbf", "resubstitution",
           "krp", "linear", "duplicates")
#: the experiment's fixed split of the training file (dkrp.experiments._data._held_out)
EXPERIMENT_SPLIT_SEED = 2018
COLUMNS = ("factor", "value", "kernel", "gamma", "coef0", "C", "n_train", "n_test",
           "split_seed", "subsample_seed", "accuracy", "f1_pos", "f1_neg", "f1_macro",
           "f1_weighted", "f1_pos_best_threshold", "best_threshold", "n_support",
           "fit_seconds", "command", "started", "machine")


@functools.lru_cache(maxsize=1)
def _w8a():
    from dkrp.datasets import load_w8a

    return load_w8a()


def load_split(split_seed, fraction=0.2):
    """The training file split 80/20, stratified by label, as the experiment does.

    Parameters
    ----------
    split_seed : int or None
        ``random_state`` of ``train_test_split`` (2018 is the experiment's split); None
        returns the whole file as both parts (resubstitution: the test rows are the
        training rows).
    fraction : float, default=0.2
        Share of the rows held out for testing.

    Returns
    -------
    X_train, X_test : scipy.sparse.csr_matrix
    y_train, y_test : ndarray of int64 (labels -1 and +1)
    """
    from sklearn.model_selection import train_test_split

    X, y = _w8a()
    if split_seed is None:
        return X, X, y, y
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=fraction, stratify=y, random_state=split_seed)
    return X_train, X_test, y_train, y_test


def scores(y_test, decision, threshold=0.0):
    """Accuracy and F1 variants of the predictions ``sign(decision - threshold)``.

    Parameters
    ----------
    y_test : ndarray of labels -1 and +1
    decision : ndarray of float
        The SVM's decision values (positive means class +1).
    threshold : float, default=0.0

    Returns
    -------
    dict
        ``accuracy`` (percent), ``f1_pos`` (F1 of class +1), ``f1_neg``, ``f1_macro``,
        ``f1_weighted``, and ``f1_pos_best_threshold`` with ``best_threshold``: the
        largest F1 of class +1 over all thresholds on ``decision`` (an oracle bound).
    """
    from sklearn.metrics import accuracy_score, f1_score, precision_recall_curve

    predicted = np.where(decision > threshold, 1, -1)
    precision, recall, thresholds = precision_recall_curve(y_test == 1, decision)
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0)
    best = int(np.argmax(f1[:-1]))
    return {
        "accuracy": 100 * accuracy_score(y_test, predicted),
        "f1_pos": f1_score(y_test, predicted, pos_label=1),
        "f1_neg": f1_score(y_test, predicted, pos_label=-1),
        "f1_macro": f1_score(y_test, predicted, average="macro"),
        "f1_weighted": f1_score(y_test, predicted, average="weighted"),
        "f1_pos_best_threshold": float(f1[best]),
        "best_threshold": float(thresholds[best]),
    }


def fit_and_score(split_seed, n_train, subsample_seed, kernel, gamma, coef0, C, cache_mb):
    """One exact SVM: fit on (a stratified subsample of) the training part, score the test part.

    Parameters
    ----------
    split_seed : int
        Seed of the 80/20 split of the training file.
    n_train : int or None
        Rows of the training part to fit on (stratified subsample), None for all.
    subsample_seed : int
        Seed of that subsample (``dkrp.evaluation.stratified_subsample``).
    kernel : {"poly", "rbf"}
    gamma : float or "scale"
    coef0 : float
    C : float
    cache_mb : float
        libsvm's kernel cache.

    Returns
    -------
    dict
        The run's row without ``factor``, ``value`` and provenance columns.
    """
    from sklearn.svm import SVC

    from dkrp.evaluation import stratified_subsample

    X_train, X_test, y_train, y_test = load_split(split_seed)
    X, y = stratified_subsample(X_train, y_train, n_train, subsample_seed)
    params = {"degree": 2, "coef0": coef0} if kernel == "poly" else {}
    model = SVC(kernel=kernel, C=C, gamma=gamma, cache_size=cache_mb, **params)
    t0 = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - t0
    decision = model.decision_function(X_test)  # > 0 means classes_[1] = +1
    return {"kernel": kernel, "gamma": gamma, "coef0": coef0 if kernel == "poly" else "",
            "C": C, "n_train": X.shape[0], "n_test": X_test.shape[0],
            "split_seed": split_seed, "subsample_seed": subsample_seed,
            **scores(y_test, decision), "n_support": int(model.n_support_.sum()),
            "fit_seconds": seconds}


def linear_fit_and_score(split_seed, C):
    """The experiment's linear SVM on raw features (liblinear primal, not standardised).

    Parameters
    ----------
    split_seed : int or None
        As in :func:`load_split` (None: fit and score on the whole file).
    C : float

    Returns
    -------
    dict
        The run's row without ``factor``, ``value`` and provenance columns.
    """
    from sklearn.svm import LinearSVC

    X_train, X_test, y_train, y_test = load_split(split_seed)
    t0 = time.perf_counter()
    model = LinearSVC(C=C, dual=False, max_iter=10000).fit(X_train, y_train)
    seconds = time.perf_counter() - t0
    return {"kernel": "linear (raw features, liblinear)", "gamma": "", "coef0": "", "C": C,
            "n_train": X_train.shape[0], "n_test": X_test.shape[0],
            "split_seed": split_seed, "subsample_seed": "",
            **scores(y_test, model.decision_function(X_test)), "n_support": "",
            "fit_seconds": seconds}


def krp_fit_and_score(split_seed, C, k=2000, p=446, t=10, seed=0):
    """KRP features and a linear SVM, as the classification experiment builds them.

    KRP with Gaussian pools (degree 2) fitted on the training part, ``StandardScaler`` on
    its features and :class:`dkrp.linear_svm.PrimalLinearSVC` (float32 features).

    Parameters
    ----------
    split_seed : int or None
        As in :func:`load_split` (None: fit and score on the whole file).
    C : float
    k, p, t : int
        Output dimension, pool size and number of terms (Table 10's k = 2000, p = 446).
    seed : int
        The map's seed.

    Returns
    -------
    dict
        The run's row without ``factor``, ``value`` and provenance columns.
    """
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from dkrp.experiments._maps import make_map
    from dkrp.linear_svm import PrimalLinearSVC

    X_train, X_test, y_train, y_test = load_split(split_seed)
    t0 = time.perf_counter()
    projector = make_map("krp-gaussian", degree=2, k=k, p=p, t=t, seed=seed).fit(X_train)
    Z_train = np.asarray(projector.transform(X_train), dtype=np.float32)
    Z_test = np.asarray(projector.transform(X_test), dtype=np.float32)
    model = make_pipeline(StandardScaler(), PrimalLinearSVC(C=C)).fit(Z_train, y_train)
    seconds = time.perf_counter() - t0
    return {"kernel": f"krp-gaussian k={k} p={p} t={t} + linear SVM", "gamma": "",
            "coef0": "", "C": C, "n_train": X_train.shape[0], "n_test": X_test.shape[0],
            "split_seed": split_seed, "subsample_seed": "",
            **scores(y_test, model.decision_function(Z_test)), "n_support": "",
            "fit_seconds": seconds}


def duplicate_bound(X, y):
    """Identical feature vectors with disagreeing labels, and the F1 they cap.

    Parameters
    ----------
    X : scipy.sparse matrix
        Rows of w8a (binary features).
    y : ndarray of labels -1 and +1

    Returns
    -------
    dict
        ``rows``, ``distinct`` feature vectors, ``zero_rows`` (no feature set) with
        ``zero_row_positives``, ``rows_in_conflicting_groups`` (rows whose feature vector
        also occurs with the other label), ``positives`` and
        ``positives_in_conflicting_groups``, ``f1_pos_majority_bound``: the F1 of class +1
        on these rows when each distinct vector is predicted as its majority label (ties
        to +1), and ``f1_pos_best_bound``: the largest F1 of class +1 that any function
        of the features reaches on these rows (for the best F1 the groups predicted +1
        are those with the highest share of positives: the best prefix of the groups
        sorted by that share). No classifier of these features beats it on these rows.
    """
    from sklearn.metrics import f1_score

    X = X.copy().tocsr()
    X.sort_indices()
    keys = [X.indices[X.indptr[i]:X.indptr[i + 1]].tobytes()
            + np.asarray(X.data[X.indptr[i]:X.indptr[i + 1]]).tobytes()
            for i in range(X.shape[0])]
    _, group = np.unique(np.array(keys, dtype=object), return_inverse=True)
    n_groups = int(group.max()) + 1
    pos = np.bincount(group, weights=(y == 1), minlength=n_groups)
    neg = np.bincount(group, weights=(y == -1), minlength=n_groups)
    conflicting = (pos > 0) & (neg > 0)
    majority = np.where(pos >= neg, 1, -1)
    order = np.argsort(-(pos / (pos + neg)), kind="stable")
    tp, fp = np.cumsum(pos[order]), np.cumsum(neg[order])
    zero = np.diff(X.indptr) == 0
    return {"rows": X.shape[0], "distinct": n_groups, "zero_rows": int(zero.sum()),
            "zero_row_positives": int((zero & (y == 1)).sum()),
            "rows_in_conflicting_groups": int(conflicting[group].sum()),
            "positives": int((y == 1).sum()),
            "positives_in_conflicting_groups": int((conflicting[group] & (y == 1)).sum()),
            "f1_pos_majority_bound": float(f1_score(y, majority[group], pos_label=1)),
            "f1_pos_best_bound": float(np.max(2 * tp / (tp + fp + pos.sum())))}


def duplicate_table(splits):
    """:func:`duplicate_bound` of the whole file and of each split's held-out part.

    Parameters
    ----------
    splits : list of int
        Split seeds (the experiment's 2018 is always included, first).

    Returns
    -------
    list of dict
        One row per set of rows, ``rows_of`` naming it.
    """
    X, y = _w8a()
    out = [{"rows_of": "whole training file", **duplicate_bound(X, y)}]
    for seed in [EXPERIMENT_SPLIT_SEED] + [s for s in splits if s != EXPERIMENT_SPLIT_SEED]:
        _, X_test, _, y_test = load_split(seed)
        out.append({"rows_of": f"held-out part of split {seed}",
                    **duplicate_bound(X_test, y_test)})
    return out


def plan(factors, n_train, splits, C_grid, n_train_grid):
    """The runs of ``factors``: (factor, value, keyword arguments of :func:`fit_and_score`).

    Parameters
    ----------
    factors : list of str
        Names from ``FACTORS`` (``duplicates`` is handled apart).
    n_train : int or None
        The baseline's training rows (None: the whole training part).
    splits : list of int
        Split seeds of the ``split`` factor (the baseline's split is 2018).
    C_grid : list of float
    n_train_grid : list of int

    Returns
    -------
    list of tuple
    """
    base = {"split_seed": EXPERIMENT_SPLIT_SEED, "n_train": n_train, "subsample_seed": 0,
            "kernel": "poly", "gamma": 1.0, "coef0": 0.0, "C": 1.0}
    runs = []
    for factor in factors:
        if factor == "baseline":
            runs.append(("baseline", "paper kernel <x,y>^2, C=1", base))
        elif factor == "gamma":
            runs += [("gamma", "1/n_features", {**base, "gamma": 1.0 / 300}),
                     ("gamma", "scale", {**base, "gamma": "scale"})]
        elif factor == "coef0":
            runs.append(("coef0", "1", {**base, "coef0": 1.0}))
        elif factor == "C":
            runs += [("C", f"{C:g}", {**base, "C": C}) for C in C_grid if C != 1.0]
        elif factor == "n_train":
            runs += [("n_train", f"{n}", {**base, "n_train": n}) for n in n_train_grid
                     if n != n_train]
        elif factor == "split":
            runs += [("split", f"seed {s}", {**base, "split_seed": s}) for s in splits
                     if s != EXPERIMENT_SPLIT_SEED]
        elif factor == "resubstitution":
            whole = {**base, "split_seed": None, "n_train": None}
            runs += [("resubstitution", "poly C=1, fit and scored on all 49,749 rows", whole),
                     ("resubstitution", "rbf C=200 gamma=0.05, fit and scored on all rows",
                      {**whole, "kernel": "rbf", "gamma": 0.05, "C": 200.0})]
        elif factor == "krp":
            for C in (0.01, 1.0):
                runs += [("krp", f"KRP k=2000 held out, C={C:g}",
                          {"split_seed": EXPERIMENT_SPLIT_SEED, "C": C, "fit": "krp"}),
                         ("krp", f"KRP k=2000 resubstitution, C={C:g}",
                          {"split_seed": None, "C": C, "fit": "krp"})]
        elif factor == "linear":
            runs += [("linear", "raw features C=1 held out",
                      {"split_seed": EXPERIMENT_SPLIT_SEED, "C": 1.0, "fit": "linear"}),
                     ("linear", "raw features C=1 resubstitution",
                      {"split_seed": None, "C": 1.0, "fit": "linear"})]
        elif factor == "rbf":
            runs.append(("rbf", "paper Gaussian SVM C=200 gamma=0.05",
                         {**base, "kernel": "rbf", "gamma": 0.05, "C": 200.0}))
    return runs


def table(path):
    """A Markdown table of the runs in ``path``: each run's F1 and its change from the baseline.

    The change is against the ``baseline`` run with the same ``n_train`` (the last one in
    the file), or the full-size baseline for the ``n_train`` factor and resubstitution;
    the linear and KRP rows have none.

    Parameters
    ----------
    path : pathlib.Path
        A CSV written by this script.

    Returns
    -------
    str
    """
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    baselines = {r["n_train"]: float(r["f1_pos"]) for r in rows if r["factor"] == "baseline"}
    full = max(baselines, key=int) if baselines else None
    lines = ["| factor | value | model | n_train | split | accuracy % | F1(+1) "
             "| change vs baseline | F1 macro | F1 weighted | F1(+1) best threshold | fit s |",
             "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ref = baselines.get(full if r["factor"] in ("n_train", "resubstitution")
                            else r["n_train"])
        exact = r["kernel"] in ("poly", "rbf")  # linear and KRP rows: no poly baseline
        change = "" if ref is None or not exact else f"{float(r['f1_pos']) - ref:+.4f}"
        split = r["split_seed"] or "none (train = test)"
        model = {"poly": "exact SVM, poly", "rbf": "exact SVM, rbf"}.get(r["kernel"],
                                                                        r["kernel"])
        lines.append(f"| {r['factor']} | {r['value']} | {model} | {r['n_train']} | {split} | "
                     f"{float(r['accuracy']):.2f} | {float(r['f1_pos']):.4f} | {change} | "
                     f"{float(r['f1_macro']):.4f} | {float(r['f1_weighted']):.4f} | "
                     f"{float(r['f1_pos_best_threshold']):.4f} | "
                     f"{float(r['fit_seconds']):.1f} |")
    return "\n".join(lines)


def main(argv=None):
    """Run the chosen factors and append one CSV row per fitted SVM."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Needs w8a under DKRP_DATA_DIR (or ../shared/data). Run single-threaded "
               "(OMP_NUM_THREADS=1) on a shared machine.")
    parser.add_argument("--factors", nargs="+", choices=FACTORS, default=["baseline"],
                        help="factors to vary, one at a time (default: baseline)")
    parser.add_argument("--n-train", type=int, default=None,
                        help="training rows of every run but the n_train factor's "
                             "(default: all 39,799 of the training part)")
    parser.add_argument("--splits", type=int, nargs="+", default=[0, 1, 2, 3],
                        help="split seeds of the split factor, besides the experiment's 2018")
    parser.add_argument("--C-grid", type=float, nargs="+", default=[0.1, 1.0, 10.0, 100.0])
    parser.add_argument("--n-train-grid", type=int, nargs="+", default=[5000, 10000, 20000])
    parser.add_argument("--cache-mb", type=float, default=1000.0, help="libsvm kernel cache")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"CSV to append to (default: {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    parser.add_argument("--table", action="store_true",
                        help="print a Markdown table of --out and fit nothing")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.out))
        return

    command = "python benchmarks/w8a_protocol.py " + " ".join(
        os.sys.argv[1:] if argv is None else argv)
    machine = f"{platform.machine()}, {os.cpu_count()} cores"
    if "duplicates" in args.factors:
        rows = duplicate_table(args.splits)
        path = args.out.with_name("duplicates.csv")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]) + ["command"])
            writer.writeheader()
            writer.writerows({**r, "command": command} for r in rows)
        for r in rows:
            print("duplicates: " + ", ".join(f"{k} {v}" for k, v in r.items()), flush=True)
    runs = plan(args.factors, args.n_train, args.splits, args.C_grid, args.n_train_grid)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for factor, value, kwargs in runs:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        fit = kwargs.pop("fit", "svc")
        if fit == "krp":
            result = krp_fit_and_score(**kwargs)
        elif fit == "linear":
            result = linear_fit_and_score(**kwargs)
        else:
            result = fit_and_score(cache_mb=args.cache_mb, **kwargs)
        row = {"factor": factor, "value": value, **result,
               "command": command, "started": started, "machine": machine}
        new = not args.out.exists()
        with args.out.open("a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            if new:
                writer.writeheader()
            writer.writerow(row)
        print(f"{factor:9s} {value:36s} n_train={row['n_train']:>6} split={row['split_seed']}: "
              f"acc {row['accuracy']:.2f}%  F1(+1) {row['f1_pos']:.4f}  macro "
              f"{row['f1_macro']:.4f}  weighted {row['f1_weighted']:.4f}  best-threshold "
              f"F1(+1) {row['f1_pos_best_threshold']:.4f}  ({row['fit_seconds']:.1f} s)",
              flush=True)


if __name__ == "__main__":
    main()
