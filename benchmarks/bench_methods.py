"""Train (fit) and transform times of every ``--method`` on the MNIST shape, beside KRP (issue 4).

Input: the 60,000 × 784 MNIST training images scaled ``x/127.5 - 1`` (float64, all
usable cores). Settings: degree g=2 (homogeneous polynomial kernel where the method
has a kernel), k=1000, p=976 and t=30 where the method has them; RFF uses the
Gaussian kernel with gamma=1/784 (fixed, so its fit reads no data). Every method is
built through :func:`dkrp.methods.make_projector`, the ``--method`` switch.

* Table 1: fit on all rows and transform of all rows, each the best of ``--repeats``
  runs in this process; ``× KRP`` compares transform times. Methods too costly for
  all rows are timed on fewer rows (column "rows timed"), never extrapolated:
  ``explicit`` (φ(x) of dimension 784² = 614,656 projected by a regenerated
  1000 × 614,656 matrix: the paper's reference, O(n d² k)), its monomial form
  (``form="monomials"``: 307,720 columns) and ``prp`` with t=30
  (60,000 fresh hyperplanes: a 784 × 60,000 GEMM per row). scikit-learn's
  ``PolynomialCountSketch`` is timed beside dkrp's TensorSketch.
* Table 2: fit time against n (1,000 / 10,000 / 60,000 rows). ``fit(X)`` of a
  data-independent method validates X (an O(n·d) finiteness check) and otherwise
  reads only ``X.shape[1]``; ``fit_n_features(d)`` is the part that does not see the
  data at all.

Usage::

    python benchmarks/bench_methods.py                     # about 5 minutes on 2 cores
    python benchmarks/bench_methods.py --repeats 5 --write-results
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    best_of,
    command_line,
    emit,
    machine_description,
    mnist_train,
)

from dkrp.methods import METHODS, make_projector  # noqa: E402

K, P, T, G = 1000, 976, 30, 2

#: name -> (method, options, rows timed for transform (None = all), note)
CONFIGS = {
    "krp": ("krp", dict(degree=G, n_components=K, n_hyperplanes=P, n_terms=T), None, ""),
    "rff": ("rff", dict(kernel="gaussian", gamma=1 / 784, n_components=K), None,
            "Gaussian kernel, gamma=1/784"),
    "nystroem": ("nystroem", dict(kernel="homogeneous_polynomial", degree=G, n_components=K),
                 None, "k=1000 landmarks"),
    "kg-rp": ("kg-rp", dict(kernel="homogeneous_polynomial", degree=G, n_components=K,
                            n_hyperplanes=P, n_terms=T), None, "p=976 landmarks"),
    "prp": ("prp", dict(degree=G, n_components=K, n_terms=T), 2000,
            "g·t·k = 60,000 fresh hyperplanes"),
    "maclaurin": ("maclaurin", dict(kernel="homogeneous_polynomial", degree=G, n_components=K),
                  None, ""),
    "tensorsketch": ("tensorsketch", dict(kernel="homogeneous_polynomial", degree=G,
                                          n_components=K), None, ""),
    "pca (k=784)": ("pca", dict(n_components=784), None, "k capped at d = 784"),
    "pca (k=100)": ("pca", dict(n_components=100), None, "for PCA-then-RBF-SVM"),
    "explicit": ("explicit", dict(degree=G, n_components=K), 500,
                 "φ(x) ∈ R^614,656 + RP; at most 500 rows (the paper's test size), 1 run"),
    "explicit (monomials)": ("explicit", dict(degree=G, n_components=K, form="monomials"), 500,
                             "the 307,720 distinct monomials, weighted + RP (Gaussian: the "
                             "tensor form's distribution); at most 500 rows, 1 run"),
}
#: too slow for repeats or the fit-against-n table
SLOW = ("explicit", "explicit (monomials)")
SIZES = (1000, 10000, 60000)


def make(name):
    method, options, _, _ = CONFIGS[name]
    return make_projector(method, random_state=0, **options)


def fit_new(factory, X):
    """Build a fresh estimator with ``factory()`` and fit it on ``X`` (the timed unit of fit)."""
    return factory().fit(X)


def fit_n_features_new(name, n_features):
    return make(name).fit_n_features(n_features)


class _SklearnPCS:
    """scikit-learn's PolynomialCountSketch(degree=2, gamma=1, coef0=0), for comparison."""

    data_dependent = False

    def __init__(self):
        from sklearn.kernel_approximation import PolynomialCountSketch

        self.est = PolynomialCountSketch(degree=G, gamma=1.0, coef0=0, n_components=K,
                                         random_state=0)

    def fit(self, X):
        self.est.fit(X)
        return self

    def transform(self, X):
        return self.est.transform(X)


def run_main_table(X, repeats):
    rows = []
    names = list(CONFIGS) + ["sklearn PolynomialCountSketch"]
    for name in names:
        if name == "sklearn PolynomialCountSketch":
            est_factory, n_rows, kind = _SklearnPCS, None, False
            note = "degree 2, gamma=1, coef0=0"
        else:
            est_factory = partial(make, name)
            n_rows, note = CONFIGS[name][2], CONFIGS[name][3]
            kind = METHODS[CONFIGS[name][0]].load().data_dependent
        reps = 1 if name in SLOW else repeats
        t_fit = best_of(partial(fit_new, est_factory, X), reps)
        est = est_factory().fit(X)
        Xt = X if n_rows is None else X[:n_rows]
        est.transform(Xt[:50])  # compile/warm outside the timings
        t_tr = best_of(partial(est.transform, Xt), reps)
        rows.append(dict(name=name, data_dependent=kind, fit=t_fit, transform=t_tr,
                         rows=Xt.shape[0], reps=reps, note=note))
        print(f"{name:30s} fit {t_fit:7.3f}s  transform {t_tr:7.3f}s on {Xt.shape[0]} rows",
              flush=True)
    return rows


def fit_sizes(n_rows):
    """The row counts of the fit-against-n table: SIZES, capped at the rows loaded."""
    return sorted({min(n, n_rows) for n in SIZES})


def run_fit_vs_n(X, repeats):
    out = []
    for name in list(CONFIGS):
        if name in SLOW:
            continue
        cls = METHODS[CONFIGS[name][0]].load()
        fits = [best_of(partial(fit_new, partial(make, name), X[:n]), repeats)
                for n in fit_sizes(X.shape[0])]
        fnf = (None if cls.data_dependent
               else best_of(partial(fit_n_features_new, name, X.shape[1]), repeats))
        out.append(dict(name=name, data_dependent=cls.data_dependent, fits=fits,
                        fit_n_features=fnf))
        print(f"{name:30s} fit vs n {' '.join(f'{t:.4f}' for t in fits)}"
              f"{'' if fnf is None else f'  fit_n_features {fnf:.4f}'}", flush=True)
    return out


def format_tables(rows, fvn, n_rows, n_features, repeats):
    sizes = fit_sizes(n_rows)
    krp = next(r for r in rows if r["name"] == "krp")
    krp_rate = krp["rows"] / krp["transform"]
    lines = [
        f"| method | data-dependent | fit s ({n_rows:,} rows) | transform s | rows timed | "
        "rows/s | transform rows/s, KRP ÷ method | note |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        rate = r["rows"] / r["transform"]
        lines.append(
            f"| {r['name']} | {'yes' if r['data_dependent'] else 'no'} | {r['fit']:.3f} | "
            f"{r['transform']:.3f} | {r['rows']:,} | {rate:,.0f} | {krp_rate / rate:.2f} | "
            f"{r['note']}{' (best of ' + str(r['reps']) + ')' if r['reps'] != repeats else ''} |"
        )
    lines += [
        "",
        "Fit time against n (seconds, best of the same repeats); the last column is "
        f"`fit_n_features({n_features})`, the data-independent methods' fit without X:",
        "",
        "| method | data-dependent | "
        + " | ".join(f"n={n:,}" for n in sizes)
        + f" | n={sizes[-1]:,} ÷ n={sizes[0]:,} | fit_n_features({n_features}) |",
        "|---|---|" + "---:|" * (len(sizes) + 2),
    ]
    for r in fvn:
        fits = r["fits"]
        lines.append(
            f"| {r['name']} | {'yes' if r['data_dependent'] else 'no'} | "
            + " | ".join(f"{t:.4f}" for t in fits)
            + f" | {fits[-1] / fits[0]:.1f} | "
            + ("—" if r["fit_n_features"] is None else f"{r['fit_n_features']:.4f}")
            + " |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=60000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write-results", action="store_true",
                        help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    X, source = mnist_train(args.rows)
    X = np.ascontiguousarray(X)
    print(machine_description(), flush=True)
    rows = run_main_table(X, args.repeats)
    fvn = run_fit_vs_n(X, args.repeats)
    table = format_tables(rows, fvn, X.shape[0], X.shape[1], args.repeats)
    sizes = fit_sizes(X.shape[0])
    indep = [r for r in fvn if not r["data_dependent"]]
    worst = max(indep, key=lambda r: r["fits"][-1] / r["fits"][0])
    summary = (
        f"- Data-independent methods' fit_n_features does not see the data; their fit(X) grows "
        f"from n={sizes[0]:,} to n={sizes[-1]:,} by at most "
        f"{worst['fits'][-1] / worst['fits'][0]:.1f}× "
        f"({worst['name']}: {worst['fits'][0]:.4f} → {worst['fits'][-1]:.4f} s), against the "
        "data-dependent methods' "
        + ", ".join(f"{r['name']} {r['fits'][-1] / r['fits'][0]:.1f}×"
                    for r in fvn if r["data_dependent"])
        + "."
    )
    title = (
        f"Every method on the MNIST shape: fit and transform, {X.shape[0]:,} × {X.shape[1]} "
        f"({source}), g={G}, k={K}, p={P}, t={T} where applicable, float64"
    )
    body = (
        f"Each figure: best of {args.repeats} runs in one process unless the note says "
        "otherwise; methods too costly for all rows are timed on fewer (\"rows timed\"), "
        "never extrapolated.\n\n" + table + "\n\n" + summary
    )
    emit("bench_methods", title, body, command_line("bench_methods.py", parser, args),
         args.write_results)


if __name__ == "__main__":
    main()
