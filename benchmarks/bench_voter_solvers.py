"""The ensemble's solver table (issue 33): one voter's linear fit by each solver, over n and k.

A voter of :class:`dkrp.RandomFeatureVotingClassifier` is an RFF map and a linear SVM. This
times the three solvers :func:`dkrp.ensemble.make_model` offers for its linear SVM on the
same features, one thread each (a voter's share on a worker of one thread):

* ``dual``: ``LinearSVC(dual=True)``, liblinear's dual coordinate descent;
* ``newton``: :class:`dkrp.PrimalLinearSVC`, the primal Newton-CG with BLAS products (the
  same problem as ``dual``: squared hinge, L2, so the same minimiser);
* ``sgd``: ``SGDClassifier(loss="hinge", alpha=1/(C n), average=True)``: averaged SGD, whose
  averaged iterate converges where plain SGD's last iterate does not (plain SGD ran its
  50 epochs without meeting ``tol`` in the scaling benchmark).

Data: the rows :mod:`bench_ensemble_scaling` trains on (augmented pooled MNIST, float32, the
first ``n`` of its seeded permutation), mapped by 500 or 2,000 RFF
(``gamma = 1/(196 Var X)``, seed 1); test accuracy on the real 10,000 pooled test images.
For each ``k`` of ``--ks`` and ``n`` of ``--ns`` (ascending): featurize once, then each
solver's fit, timed (wall; one thread). A solver stops for this ``k`` after a fit longer
than ``--max-seconds``, and does not start one that its last fit, grown linearly in ``n``
(a lower bound for each), projects over ``--max-seconds``.

Printed per cell: fit seconds, iterations (epochs for SGD, Newton iterations for newton,
liblinear's for dual), whether the solver met its tolerance, test accuracy and, for the
two squared-hinge solvers, the objective summed over the one-vs-rest problems (equal
to about ``tol``: the same minimiser). The fastest solver of each cell among those that
met their tolerance is the cell's choice (SGD minimises the hinge loss, not its square,
so its accuracy differs from the other two by a model's difference, not a solver's);
``estimator="auto"`` follows that table
(:data:`dkrp.ensemble.voters.NEWTON_MIN_SAMPLES`).

Usage::

    python benchmarks/bench_voter_solvers.py
    python benchmarks/bench_voter_solvers.py --ns 2000 10000 --ks 500 --max-seconds 30
    python benchmarks/bench_voter_solvers.py --write-results
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, emit  # noqa: E402
from bench_ensemble_scaling import augmented_rows, load_pooled_mnist  # noqa: E402
from bench_linear_svm import objective  # noqa: E402

SOLVERS = ("dual", "newton", "sgd")


def fit_one(solver, Z, y, Zt, yt, C, seed):
    """One timed fit of ``solver``'s model (as :func:`make_model` builds it); its row."""
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    from dkrp.ensemble import make_model

    model = make_model(solver, C, Z.shape[0], Z.shape[1], seed)
    with threadpool_limits(1), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        t0 = time.perf_counter()
        model.fit(Z, y)
        seconds = time.perf_counter() - t0
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    accuracy = float((model.predict(Zt) == yt).mean())
    squared_hinge = solver != "sgd"
    return {"fit_s": seconds, "iterations": int(np.max(np.atleast_1d(model.n_iter_))),
            "converged": converged, "accuracy": accuracy,
            "objective": objective(Z, y, model, C) if squared_hinge else float("nan")}


def skip_reason(last, n, max_seconds):
    """Why a solver whose last fit was ``last`` = (n, seconds) is not run at ``n``, or None.

    Examples
    --------
    >>> skip_reason((10_000, 50.0), 40_000, 100)
    'projected 200 s at n^1 > --max-seconds 100 s'
    """
    if last is None:
        return None
    n_last, t_last = last
    if t_last > max_seconds:
        return f"stopped: the fit at n = {n_last:,} took {t_last:.0f} s > --max-seconds"
    if t_last * n / n_last > max_seconds:
        return f"projected {t_last * n / n_last:.0f} s at n^1 > --max-seconds {max_seconds:g} s"
    return None


def choice(cell):
    """The cell's solver: the fastest that met its tolerance (None when none did).

    Examples
    --------
    >>> choice({"dual": {"fit_s": 9.0, "converged": True},
    ...         "newton": {"fit_s": 2.0, "converged": True}, "sgd": None})
    'newton'
    """
    fine = {s: r for s, r in cell.items() if r is not None and r["converged"]}
    return min(fine, key=lambda s: fine[s]["fit_s"]) if fine else None


def run(args):
    import dkrp
    from dkrp.kernels import scale_gamma

    X_all, y_all, X_test, y_test, note = load_pooled_mnist()
    rows = []
    for k in sorted(args.ks):
        last = {}
        stopped = {}
        for n in sorted(args.ns):
            X, y = augmented_rows(X_all, y_all, n, seed=args.seed)
            projector = dkrp.RandomFourierFeatures(gamma=scale_gamma(X), n_components=k,
                                                   random_state=1).fit(X)
            Zt = projector.transform(X_test)  # untimed: the first call pays one-time costs
            t0 = time.perf_counter()
            Z = projector.transform(X)
            featurize_s = time.perf_counter() - t0
            cell = {}
            for solver in args.solvers:
                reason = stopped.get(solver) or skip_reason(last.get(solver), n,
                                                           args.max_seconds)
                if reason is not None:
                    stopped.setdefault(solver, reason)
                    cell[solver] = None
                    print(f"k={k:>5} n={n:>8,} {solver:<7} not run: {reason}", flush=True)
                    continue
                r = fit_one(solver, Z, y, Zt, y_test, args.C, args.seed)
                cell[solver] = r
                last[solver] = (n, r["fit_s"])
                print(f"k={k:>5} n={n:>8,} {solver:<7} {r['fit_s']:8.2f} s  "
                      f"iter {r['iterations']:>4}  converged {r['converged']!s:<5}  "
                      f"accuracy {100 * r['accuracy']:.2f} %  objective {r['objective']:.6g}",
                      flush=True)
            rows.append({"k": k, "n": n, "featurize_s": featurize_s, "cell": cell,
                         "choice": choice(cell)})
            del Z, Zt
    return rows, note


def format_table(rows, solvers):
    head = ("| k | n | featurize s | " + " | ".join(f"{s} fit s (iter) | {s} acc %"
                                                   for s in solvers) + " | fastest |")
    lines = [head, "|" + "---:|" * (3 + 2 * len(solvers)) + "---|"]
    for row in rows:
        cells = []
        for s in solvers:
            r = row["cell"].get(s)
            if r is None:
                cells += ["-", "-"]
            else:
                mark = "" if r["converged"] else " (not converged)"
                cells += [f"{r['fit_s']:.2f} ({r['iterations']}){mark}",
                          f"{100 * r['accuracy']:.2f}"]
        lines.append(f"| {row['k']:,} | {row['n']:,} | {row['featurize_s']:.2f} | "
                     + " | ".join(cells) + f" | {row['choice'] or '-'} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ns", type=int, nargs="+",
                        default=[2_000, 5_000, 10_000, 40_000, 100_000, 300_000])
    parser.add_argument("--ks", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--solvers", nargs="+", choices=SOLVERS, default=list(SOLVERS))
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--max-seconds", type=float, default=200.0,
                        help="a solver stops after a fit this long, and does not start one "
                             "projected (linear in n) over it")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write-results", action="store_true",
                        help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    rows, note = run(args)
    table = format_table(rows, args.solvers)
    print(table)
    body = "\n".join([
        f"Data: {note}; as float32, the first n rows of bench_ensemble_scaling's augmented "
        "set (seed 0); RFF (gamma = 1/(196 Var X) of the n rows, seed 1) in float32; test: "
        f"the 10,000 pooled test images. C = {args.C:g}. One fit per cell, one thread "
        "(threadpoolctl), as a voter runs on a worker of one thread. `dual`: "
        "`LinearSVC(dual=True)`; `newton`: `dkrp.PrimalLinearSVC`; `sgd`: "
        "`SGDClassifier(loss=\"hinge\", alpha=1/(C n), average=True)`; iterations: "
        "liblinear's, Newton's, SGD's epochs. Fastest: the fastest solver that met its "
        "tolerance.",
        "",
        table,
    ])
    emit("bench_voter_solvers", "The ensemble's solver table (issue 33): one voter's linear "
         "fit by dual liblinear, the primal Newton-CG and averaged SGD, over n and k", body,
         command_line("bench_voter_solvers.py", parser, args), args.write_results)


if __name__ == "__main__":
    main()
