"""Honest scaling (issue 14): training time vs n of the voting ensemble and the exact RBF SVC.

Data: pooled MNIST as the ``ensemble`` experiment uses it (pixels x/255, 2x2 max-pooled to
14x14 = 196 features; :func:`dkrp.experiments._data.load_split` ``"mnist-pooled"``), the
60,000 training images grown by a label-preserving augmentation: every image shifted by
``(dx, dy)`` in ``{-2..2}^2`` on its 14x14 grid (pixels shifted in from outside the image
are 0), 25 copies, 1,500,000 rows. The first ``n`` rows of one seeded permutation of the
augmented set train (so the sets are nested: n = 20,000 holds n = 10,000); the test set is
the real 10,000-image test set, pooled, never augmented. Rows are float32 (1.5M x 196 is
1.2 GB; the maps then compute float32 features).

For each ``n`` of ``--ns`` (ascending), with ``gamma = 1/(196 Var X)`` of those ``n`` rows and
``C`` as the experiment (1):

* ``ensemble-full``: :class:`dkrp.RandomFeatureVotingClassifier`, strategy ``"full"``,
  ``--voters`` voters of ``--rff`` RFF each, ``estimator="auto"`` (the library's rule,
  measured by ``bench_voter_solvers.py``; the solver used is in the table);
* ``ensemble-partition``: strategy ``"partition"``, one voter per row block, blocks of
  ``--partition-rows`` rows (``ceil(n / partition-rows)`` voters, at least ``--voters``);
  each voter's solver by the same rule on its block's rows;
* ``rbf-svc``: ``sklearn.svm.SVC(kernel="rbf", gamma, C)`` (libsvm, one thread), in this
  process; run at ``n`` only while its last fit, grown as n^2 (its cost grows about so),
  projects under ``--svc-budget`` seconds;
* ``sklearn-bagging``: scikit-learn's nearest equivalent of the full ensemble, a
  ``BaggingClassifier`` of ``--voters`` pipelines ``RBFSampler -> LinearSVC(dual=True)``,
  each on all rows (``bootstrap=False``), ``n_jobs=--workers``, in this process.

Each ensemble's **floor** is measured in the same run, just before its fit: one voter's
featurize plus fit (voter 0 as ``fit`` trains it: its map, seeds, solver and rows), alone
in this process on one thread, the fastest of two, times the voters, divided by the
workers' threads. The table gives the fit as a multiple of it (issue 33's target: 1.5).

The ensembles train on an embedded cluster (:func:`dkrp.parallel.start_local_cluster`,
``--workers`` worker processes x 1 thread on 127.0.0.1) as a user would, warmed up once
(imports, compiled kernels; untimed) as a long-lived cluster is; the peak worker RSS is
sampled every 0.5 s during each fit (memory a worker kept from earlier fits included).
Each method stops after the first ``n`` whose fit took longer than ``--max-seconds``, and
does not start a fit that its last one, grown linearly in ``n`` (a lower bound for every
method here), projects over ``--max-seconds``; where each stopped is reported. Fit seconds
are the wall time of ``fit`` (the scatter of X to the workers included), predict seconds
that of ``predict`` on the 10,000 test rows in this process.

The crossover is the smallest ``n`` from which an ensemble's fit stays faster than the
SVC's, up to the largest ``n`` the ensemble reached: both curves piecewise linear in
log-log between measured points, the SVC's extended past its last measured ``n`` by the
power law ``t = a n^b`` fitted (least squares, log-log) to its last three points.

Writes ``results/ensemble_scaling.csv`` and ``results/ensemble_scaling.png`` (``--out``
changes the folder); with ``--write-results`` also its section of ``benchmarks/RESULTS.md``.

The default grid (10k, 20k, 40k, 100k, 300k, 1M) and limits are sized for about 20 minutes
on 2 quiet cores (AMD EPYC): estimated from single-voter CPU times, the full strategy runs to
100,000 rows (300,000 projects over --max-seconds), the partition strategy to 1,000,000, the
SVC to 40,000 (100,000 projects over --svc-budget).

Usage::

    python benchmarks/bench_ensemble_scaling.py                 # the default grid
    python benchmarks/bench_ensemble_scaling.py --ns 2000 4000 --svc-budget 60 --out /tmp/x
    python benchmarks/bench_ensemble_scaling.py --write-results
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import MemorySampler, command_line, emit, machine_description  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"
SIDE = 14
#: The label-preserving shifts of the 14x14 pooled images: (dx, dy) in {-2..2}^2.
SHIFTS = tuple((dx, dy) for dy in range(-2, 3) for dx in range(-2, 3))
METHODS = ("ensemble-full", "ensemble-partition", "rbf-svc", "sklearn-bagging")
ENSEMBLES = METHODS[:2]
#: Points of the SVC's curve its power-law extrapolation is fitted to.
SVC_FIT_POINTS = 3


# -- data ----------------------------------------------------------------------------------


def shift_images(X, dx, dy, side=SIDE):
    """Rows of ``side x side`` images shifted ``dx`` columns right and ``dy`` rows down.

    Pixels shifted in from outside the image are 0 (no wrap-around).

    Examples
    --------
    >>> shift_images(np.arange(1.0, 5.0).reshape(1, 4), 1, 0, side=2).tolist()
    [[0.0, 1.0, 0.0, 3.0]]
    """
    X = np.asarray(X)
    images = X.reshape(-1, side, side)
    out = np.zeros_like(images)
    src_r = slice(max(0, -dy), side - max(0, dy))
    dst_r = slice(max(0, dy), side - max(0, -dy))
    src_c = slice(max(0, -dx), side - max(0, dx))
    dst_c = slice(max(0, dx), side - max(0, -dx))
    out[:, dst_r, dst_c] = images[:, src_r, src_c]
    return out.reshape(X.shape)


def augmented_size(n_images):
    """Rows of the augmented set: one per (shift, image)."""
    return len(SHIFTS) * int(n_images)


def augmented_rows(X, y, n, seed=0, side=SIDE):
    """The first ``n`` rows of the seeded permutation of the augmented set of ``(X, y)``.

    Row ``r`` of the augmented set is image ``r % len(X)`` shifted by ``SHIFTS[r // len(X)]``;
    only the ``n`` rows asked for are built. Labels are the images' own.
    """
    total = augmented_size(len(X))
    if not 1 <= n <= total:
        raise ValueError(f"n must be in 1..{total} (the augmented set's rows), got {n}.")
    order = np.random.default_rng(seed).permutation(total)[:n]
    shift, image = np.divmod(order, len(X))
    out = np.empty((n, X.shape[1]), dtype=X.dtype)
    for s in np.unique(shift):
        rows = np.flatnonzero(shift == s)
        dx, dy = SHIFTS[s]
        out[rows] = shift_images(X[image[rows]], dx, dy, side)
    return out, np.asarray(y)[image]


def load_pooled_mnist():
    """Pooled MNIST (x/255, 2x2 max-pooled, 196 features) as float32: the experiment's split."""
    from dkrp.experiments._data import load_split

    split = load_split("mnist-pooled")
    return (np.asarray(split.X_train, dtype=np.float32), np.asarray(split.y_train),
            np.asarray(split.X_test, dtype=np.float32), np.asarray(split.y_test), split.note)


# -- the crossover -------------------------------------------------------------------------


def power_law(ns, ts):
    """``(a, b)`` of ``t = a n^b`` fitted by least squares in log-log."""
    b, log_a = np.polyfit(np.log(ns), np.log(ts), 1)
    return float(np.exp(log_a)), float(b)


def _loglog_interp(ns, ts, grid):
    return np.exp(np.interp(np.log(grid), np.log(ns), np.log(ts)))


def crossover(ens, svc, fit_points=SVC_FIT_POINTS, resolution=4000):
    """The smallest n from which the ensemble's fit stays faster than the SVC's.

    Parameters
    ----------
    ens, svc : dict
        Fit seconds by n, as measured (at least one point each).
    fit_points : int
        The SVC's last points that fit the power law extending it past its last n.

    Returns
    -------
    dict
        ``n`` (None when the ensemble is not faster at its largest n), ``how``: ``"below"``
        (faster at every n both cover, from the smallest ensemble n), ``"measured"`` (the
        curves cross where the SVC was measured), ``"extrapolated"`` (where the SVC is the
        power law), or ``"never"``; ``b``: the power law's exponent (None with one point).

    Examples
    --------
    >>> round(crossover({1e3: 4.0, 1e5: 4.0}, {1e3: 1.0, 1e4: 10.0})["n"])
    4000
    """
    e_n = np.array(sorted(ens), dtype=float)
    e_t = np.array([ens[n] for n in sorted(ens)], dtype=float)
    s_n = np.array(sorted(svc), dtype=float)
    s_t = np.array([svc[n] for n in sorted(svc)], dtype=float)
    a = b = None
    if len(s_n) >= 2:
        a, b = power_law(s_n[-fit_points:], s_t[-fit_points:])
    lo, hi = e_n[0], e_n[-1]
    grid = np.unique(np.concatenate([np.geomspace(lo, hi, resolution), e_n, s_n]))
    grid = grid[(grid >= max(lo, s_n[0])) & (grid <= hi)]
    ens_t = _loglog_interp(e_n, e_t, grid)
    svc_t = _loglog_interp(s_n, s_t, grid)
    beyond = grid > s_n[-1]
    if beyond.any():
        if a is None:  # one SVC point: nothing to extrapolate with
            grid, ens_t, svc_t = grid[~beyond], ens_t[~beyond], svc_t[~beyond]
        else:
            svc_t[beyond] = a * grid[beyond] ** b
    if not grid.size or ens_t[-1] >= svc_t[-1]:
        return {"n": None, "how": "never", "b": b}
    slower = np.flatnonzero(ens_t >= svc_t)
    if not slower.size:
        return {"n": float(grid[0]), "how": "below", "b": b}
    i = slower[-1]  # the curves cross between grid[i] and grid[i + 1]: solve in log-log
    d0 = math.log(ens_t[i]) - math.log(svc_t[i])
    d1 = math.log(ens_t[i + 1]) - math.log(svc_t[i + 1])
    frac = d0 / (d0 - d1) if d0 != d1 else 0.0
    n_cross = math.exp(math.log(grid[i]) + frac * (math.log(grid[i + 1]) - math.log(grid[i])))
    return {"n": n_cross, "how": "measured" if n_cross <= s_n[-1] else "extrapolated", "b": b}


# -- the runs ------------------------------------------------------------------------------


def partition_voters(n, rows, min_voters):
    """Voters of the partition strategy: blocks of at most ``rows`` rows, at least ``min_voters``.

    Examples
    --------
    >>> partition_voters(100_000, 20_000, 13), partition_voters(1_000_000, 20_000, 13)
    (13, 50)
    """
    return max(int(min_voters), -(-int(n) // int(rows)))


def warm_up():
    """Import and compile what a voter uses (maps, solvers): a long-lived cluster has."""
    import dkrp
    from dkrp.ensemble.voters import make_model, train_voter

    X = np.random.default_rng(0).random((200, SIDE * SIDE), dtype=np.float32)
    y = np.arange(200) % 10
    for solver in ("dual", "newton", "sgd"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train_voter(X, y, dkrp.RandomFourierFeatures(gamma=0.01, n_components=50,
                                                         random_state=0),
                         make_model(solver, 1.0, 200, 50, 0), 0)


def _cpu_seconds(client):
    """CPU seconds the workers' processes have used (all their threads), summed."""
    return sum(client.run(time.process_time).values())


def _solvers(model):
    names = sorted({info["solver"] for info in model.voter_info_})
    return " + ".join(names)


def voter_floor(model, X, y, threads):
    """The ensemble's floor: one voter's featurize plus fit, alone in this process on one
    thread (a worker thread's share), times the voters, over the workers' ``threads``.

    The voter is voter 0 of ``model`` as its ``fit`` trains it (its map, seeds, solver,
    and rows: all of them for ``"full"``, the first row block for ``"partition"``), timed
    by :func:`dkrp.ensemble.training.time_one_voter` on all its rows (the fastest of two
    runs). Returns ``(floor seconds, one voter's seconds)``.
    """
    from dkrp.ensemble.training import time_one_voter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = time_one_voter(model, X, y, max_rows=X.shape[0])["measured"]
    return one * model.n_voters / threads, one


def fit_ensemble(strategy, X, y, X_test, y_test, gamma, args, client):
    """One ensemble fit on the cluster, timed, beside its floor; its row of the table."""
    from dkrp import RandomFeatureVotingClassifier

    n = X.shape[0]
    voters = args.voters if strategy == "full" else partition_voters(n, args.partition_rows,
                                                                      args.voters)
    model = RandomFeatureVotingClassifier(
        n_voters=voters, n_components=args.rff, gamma=gamma, C=args.C, strategy=strategy,
        random_state=args.seed)
    floor_s, voter_s = voter_floor(model, X, y, args.workers)
    cpu0 = _cpu_seconds(client)
    with MemorySampler(client, every=0.5) as memory:
        t0 = time.perf_counter()
        model.fit(X, y, client=client)
        fit_s = time.perf_counter() - t0
    cpu_s = _cpu_seconds(client) - cpu0
    t0 = time.perf_counter()
    pred = model.predict(X_test)
    predict_s = time.perf_counter() - t0
    return {"voters": voters, "rows_per_voter": -(-n // (voters if strategy == "partition"
                                                         else 1)),
            "solver": _solvers(model), "fit_s": fit_s, "fit_cpu_s": cpu_s,
            "voter_s": voter_s, "floor_s": floor_s, "predict_s": predict_s,
            "accuracy": 100.0 * float((pred == y_test).mean()),
            "worker_peak_gib": max(memory.peak.values(), default=float("nan")) / 2**30}


def fit_bagging(X, y, X_test, y_test, gamma, args):
    """scikit-learn's nearest equivalent, timed in this process: a ``BaggingClassifier`` of
    ``--voters`` pipelines ``RBFSampler(gamma, --rff) -> LinearSVC(C, dual=True)``, each on
    all rows (``bootstrap=False``, as the full strategy), ``n_jobs=--workers``."""
    from sklearn.ensemble import BaggingClassifier
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    # dual=True: liblinear's faster solver here; its primal (what dual="auto" picks for
    # n > k) took 26.3 s against the dual's 12.5 s on one 20,000 x 500 voter (issue 33 note)
    voter = make_pipeline(RBFSampler(gamma=gamma, n_components=args.rff, random_state=0),
                          LinearSVC(C=args.C, dual=True))
    model = BaggingClassifier(voter, n_estimators=args.voters, max_samples=1.0,
                              bootstrap=False, n_jobs=args.workers, random_state=args.seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = model.predict(X_test)
    predict_s = time.perf_counter() - t0
    return {"voters": args.voters, "rows_per_voter": X.shape[0],
            "solver": "LinearSVC(dual=True)", "fit_s": fit_s, "fit_cpu_s": float("nan"),
            "voter_s": "", "floor_s": "", "predict_s": predict_s,
            "accuracy": 100.0 * float((pred == y_test).mean()), "worker_peak_gib": ""}


def fit_svc(X, y, X_test, y_test, gamma, args):
    """The exact RBF SVC in this process, timed; its row of the table."""
    from sklearn.svm import SVC

    model = SVC(kernel="rbf", gamma=gamma, C=args.C)
    cpu0, t0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    fit_s = time.perf_counter() - t0
    cpu_s = time.process_time() - cpu0
    t0 = time.perf_counter()
    pred = model.predict(X_test)
    predict_s = time.perf_counter() - t0
    return {"voters": "", "rows_per_voter": "",
            "solver": f"libsvm SMO ({int(model.n_support_.sum()):,} SVs)", "fit_s": fit_s,
            "fit_cpu_s": cpu_s, "voter_s": "", "floor_s": "", "predict_s": predict_s,
            "accuracy": 100.0 * float((pred == y_test).mean()), "worker_peak_gib": ""}


def skip_reason(method, n, last, args):
    """Why ``method`` is not run at ``n`` given its ``last`` (n, fit seconds), or None.

    After a fit over ``--max-seconds`` the method stops. Before a fit, the projection of the
    last fit to ``n`` must stay under the limit: linear growth (a lower bound for every
    method here) against ``--max-seconds``, and for the SVC quadratic growth against
    ``--svc-budget``.

    Examples
    --------
    >>> a = argparse.Namespace(max_seconds=900, svc_budget=300)
    >>> skip_reason("rbf-svc", 40_000, (20_000, 100.0), a)
    'projected 400 s at n^2 > --svc-budget 300 s'
    >>> skip_reason("ensemble-full", 40_000, (20_000, 100.0), a) is None
    True
    """
    if last is None:
        return None
    n_last, t_last = last
    if t_last > args.max_seconds:
        return f"stopped: fit at n = {n_last:,} took {t_last:.0f} s > --max-seconds"
    linear = t_last * n / n_last
    if linear > args.max_seconds:
        return f"projected {linear:.0f} s at n^1 > --max-seconds {args.max_seconds:g} s"
    if method == "rbf-svc":
        quadratic = t_last * (n / n_last) ** 2
        if quadratic > args.svc_budget:
            return f"projected {quadratic:.0f} s at n^2 > --svc-budget {args.svc_budget:g} s"
    return None


def run(args, client):
    from dkrp.kernels import scale_gamma

    X_all, y_all, X_test, y_test, note = load_pooled_mnist()
    warm_up()  # this process predicts
    workers = list(client.scheduler_info()["workers"])
    client.gather([client.submit(warm_up, workers=[w], allow_other_workers=False, pure=False)
                   for w in workers])  # a task each, not client.run: it would block heartbeats
    rows, last, skipped = [], {}, {}
    for n in sorted(args.ns):
        X, y = augmented_rows(X_all, y_all, n, seed=args.seed)
        gamma = scale_gamma(X)
        for method in args.methods:
            if method in skipped:
                continue
            reason = skip_reason(method, n, last.get(method), args)
            if reason is not None:
                skipped[method] = (n, reason)
                print(f"n={n:>9,} {method:<19} not run: {reason}", flush=True)
                continue
            if method == "rbf-svc":
                row = fit_svc(X, y, X_test, y_test, gamma, args)
            elif method == "sklearn-bagging":
                row = fit_bagging(X, y, X_test, y_test, gamma, args)
            else:
                row = fit_ensemble(method.split("-")[1], X, y, X_test, y_test, gamma, args,
                                   client)
            row = {"n": n, "method": method, "gamma": gamma, **row}
            rows.append(row)
            last[method] = (n, row["fit_s"])
            floor = (f"  = {row['fit_s'] / row['floor_s']:.2f} x floor {row['floor_s']:.1f} s"
                     if row["floor_s"] != "" else "")
            print(f"n={n:>9,} {method:<19} fit {row['fit_s']:8.1f} s{floor} (CPU "
                  f"{row['fit_cpu_s']:.1f} s)  predict "
                  f"{row['predict_s']:6.1f} s  {row['accuracy']:6.2f} %  {row['solver']}",
                  flush=True)
        del X, y
    for method in args.methods:  # a method that ran to the end of the grid
        if method not in skipped and method in last:
            skipped[method] = (None, "ran every n of the grid")
    return rows, skipped, note


# -- outputs -------------------------------------------------------------------------------


def _series(rows, method):
    return {r["n"]: r["fit_s"] for r in rows if r["method"] == method}


def crossovers(rows):
    """The crossover of each ensemble strategy against the SVC (None when one is missing)."""
    svc = _series(rows, "rbf-svc")
    out = {}
    for method in ENSEMBLES:
        ens = _series(rows, method)
        out[method] = crossover(ens, svc) if ens and svc else None
    return out


def crossover_text(method, c, rows):
    if c is None:
        return f"- {method}: no crossover computed (it or the SVC has no measured point)."
    svc_last = max(_series(rows, "rbf-svc"))
    ens_n = sorted(_series(rows, method))
    if c["how"] == "never":
        return (f"- {method}: not faster than the SVC at its largest n ({ens_n[-1]:,}), the SVC "
                f"measured to n = {svc_last:,}"
                + (f" and extended as n^{c['b']:.2f}" if c["b"] is not None else "") + ".")
    if c["how"] == "below":
        return (f"- {method}: faster than the SVC at every n both were run at, from the "
                f"smallest tried ({c['n']:,.0f}): the crossover is at or below it.")
    where = ("between measured points (log-log interpolation)" if c["how"] == "measured" else
             f"beyond the SVC's last measured n ({svc_last:,}), where the SVC is its power law "
             f"t ∝ n^{c['b']:.2f} fitted to its last {SVC_FIT_POINTS} points")
    return f"- {method}: faster than the SVC from n ≈ {c['n']:,.0f}, {where}."


def format_table(rows):
    lines = ["| n | method | voters | rows / voter | solver | fit s | floor s | fit / floor "
             "| fit CPU s | predict s | accuracy % | worker peak RSS GiB |",
             "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        rss = f"{r['worker_peak_gib']:.2f}" if r["worker_peak_gib"] != "" else "-"
        per = f"{r['rows_per_voter']:,}" if r["rows_per_voter"] != "" else "-"
        floor = (f"{r['floor_s']:.1f} | {r['fit_s'] / r['floor_s']:.2f}"
                 if r["floor_s"] != "" else "- | -")
        cpu = f"{r['fit_cpu_s']:.1f}" if r["fit_cpu_s"] == r["fit_cpu_s"] else "-"
        lines.append(f"| {r['n']:,} | {r['method']} | {r['voters'] or '-'} | {per} | "
                     f"{r['solver']} | {r['fit_s']:.1f} | {floor} | {cpu} | "
                     f"{r['predict_s']:.1f} | {r['accuracy']:.2f} | {rss} |")
    return "\n".join(lines)


COLORS = {"ensemble-full": "tab:red", "ensemble-partition": "tab:orange", "rbf-svc": "k",
          "sklearn-bagging": "tab:blue"}


def plot(rows, cross, path):
    """``path``: fit seconds vs n (log-log) and test accuracy vs n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dkrp.experiments._outputs import save_figure

    fig, (ax_t, ax_a) = plt.subplots(1, 2, figsize=(12, 4.5))
    n_max = max(r["n"] for r in rows)
    for method in METHODS:
        mine = [r for r in rows if r["method"] == method]
        if not mine:
            continue
        ns = [r["n"] for r in mine]
        ax_t.plot(ns, [r["fit_s"] for r in mine], "o-", color=COLORS[method], label=method)
        ax_a.plot(ns, [r["accuracy"] for r in mine], "o-", color=COLORS[method], label=method)
        if method == "rbf-svc" and len(ns) >= 2 and ns[-1] < n_max:
            a, b = power_law(ns[-SVC_FIT_POINTS:], [r["fit_s"] for r in mine][-SVC_FIT_POINTS:])
            ext = np.geomspace(ns[-1], n_max, 50)
            ax_t.plot(ext, a * ext**b, "--", color=COLORS[method],
                      label=f"rbf-svc extrapolated (n^{b:.2f})")
    for method, c in cross.items():
        if c is not None and c["n"] is not None:
            ax_t.axvline(c["n"], ls=":", color=COLORS[method],
                         label=f"{method} faster from n ≈ {c['n']:,.0f}")
    ax_t.set(xscale="log", yscale="log", xlabel="training rows n (augmented pooled MNIST)",
             ylabel="fit seconds (wall)", title="training time")
    ax_a.set(xscale="log", xlabel="training rows n (augmented pooled MNIST)",
             ylabel="test accuracy (%, real 10k test set)", title="accuracy")
    for ax in (ax_t, ax_a):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    return save_figure(fig, path.parent, path.name, dpi=110)


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def body_text(rows, skipped, cross, note, args, png, csv_path):
    stops = [f"- {m}: " + (f"not run from n = {n:,}: {why}" if n is not None else why)
             for m, (n, why) in sorted(skipped.items(), key=lambda kv: METHODS.index(kv[0]))]
    return "\n".join([
        f"Data: {note}; as float32. Training rows: the first n of one seeded (seed "
        f"{args.seed}) permutation of the 60,000 pooled training images augmented by "
        "label-preserving shifts of (dx, dy) in {-2..2}^2 on the 14x14 grid (zeros shifted "
        "in; 25 copies, 1,500,000 rows): sets are nested, and augmented rows are near-copies "
        "of each other, so accuracy grows more slowly with n than with fresh images. Test: "
        "the real 10,000 test images, pooled, never augmented. gamma = 1/(196 Var X) of the "
        f"n training rows, C = {args.C:g}, for every method.",
        "",
        f"Ensembles: `RandomFeatureVotingClassifier(n_components={args.rff}, "
        f"estimator=\"auto\", random_state={args.seed})` on an embedded LocalCluster of "
        f"{args.workers} worker processes x 1 thread (127.0.0.1), warmed up once (imports, "
        "compiled kernels; untimed); "
        f"`full`: {args.voters} voters on all n rows; `partition`: one voter per "
        f"row block of at most {args.partition_rows:,} rows (ceil(n / "
        f"{args.partition_rows:,}) voters, at least {args.voters}). The solver is the "
        "library's `auto` rule per voter (`dkrp.ensemble.voters.make_model`, from "
        "bench_voter_solvers). Floor s: one voter's featurize plus fit (voter 0, the "
        "ensemble's own solver and rows), alone in this process on one thread, fastest of 2, "
        f"x voters / {args.workers} worker threads; fit / floor: the ensemble's fit as a "
        "multiple of it. sklearn-bagging: scikit-learn's nearest equivalent, "
        f"`BaggingClassifier(make_pipeline(RBFSampler(gamma, n_components={args.rff}), "
        f"LinearSVC(C, dual=True)), n_estimators={args.voters}, max_samples=1.0, "
        f"bootstrap=False, n_jobs={args.workers})` in this process. SVC: "
        "`sklearn.svm.SVC(kernel=\"rbf\")`, libsvm, one thread, in this process. Fit s: wall "
        "time of `fit` (scattering X included); fit CPU s: CPU time of the fit (ensembles: "
        "the worker processes', summed; SVC: this process'), a figure that holds up better "
        "than wall time on a shared machine; predict s: `predict` on the 10,000 test rows in "
        "this process. One run per cell (no repeats).",
        "",
        format_table(rows),
        "",
        "Where each method stopped (a fit over --max-seconds ends it; a fit is not started "
        "when the last one, grown linearly in n, would exceed --max-seconds, or for the SVC "
        "grown as n^2, --svc-budget):",
        "",
        *stops,
        "",
        "Crossover (the smallest n from which the ensemble's fit stays faster than the "
        "SVC's, up to the ensemble's largest n):",
        "",
        *[crossover_text(m, c, rows) for m, c in cross.items()],
        "",
        f"Plot: `{png}`; rows: `{csv_path}`.",
    ])


def _relative(path):
    try:
        return path.resolve().relative_to(RESULTS.parent).as_posix()
    except ValueError:
        return str(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ns", type=int, nargs="+",
                        default=[10_000, 20_000, 40_000, 100_000, 300_000, 1_000_000],
                        help="training sizes (at most 1,500,000, the augmented set)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--voters", type=int, default=13)
    parser.add_argument("--rff", type=int, default=500, help="RFF per voter")
    parser.add_argument("--partition-rows", type=int, default=20_000,
                        help="largest row block of a partition voter")
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-seconds", type=float, default=500.0,
                        help="a method stops after a fit this long, and does not start one "
                             "projected (linear in n) over it")
    parser.add_argument("--svc-budget", type=float, default=300.0,
                        help="the SVC does not start a fit projected (as n^2) over this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None,
                        help="folder of ensemble_scaling.csv and .png (default: results/)")
    parser.add_argument("--write-results", action="store_true",
                        help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    from distributed import Client

    from dkrp.parallel import start_local_cluster

    print(machine_description(), flush=True)
    with start_local_cluster(n_workers=args.workers, threads_per_worker=1) as cluster, \
            Client(cluster) as client:
        rows, skipped, note = run(args, client)
    cross = crossovers(rows)
    out = RESULTS if args.out is None else args.out
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "ensemble_scaling.csv"
    write_csv(rows, csv_path)
    png = plot(rows, cross, out / "ensemble_scaling.png")
    title = (f"Ensemble scaling (issue 14): fit time vs n, {args.voters} x {args.rff}-RFF voters "
             "(full and partition) against the exact RBF SVC, augmented pooled MNIST")
    emit("bench_ensemble_scaling", title,
         body_text(rows, skipped, cross, note, args, _relative(png), _relative(csv_path)),
         command_line("bench_ensemble_scaling.py", parser, args), args.write_results)


if __name__ == "__main__":
    main()
