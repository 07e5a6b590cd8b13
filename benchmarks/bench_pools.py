"""Hyperplane pools for KRP (issue 5): distortion, transform time, FWHT vs GEMM, RFF variance.

* Distortion: mean distance distortion (eqs. 18-19 of López-Sánchez et al. 2018) on
  the 500 MNIST test digits of the paper's protocol (x/127.5 - 1, rows chosen with
  ``default_rng(2018)`` as in tests/conftest.py), over ``--seeds`` pool draws.
* Time: fit and transform of the 60,000 × 784 MNIST training images (float64, all
  usable cores), ``--repeats`` rounds in which the configurations alternate (the
  order rotates each round), reported as the median per configuration, with the
  minimum and every round beside it: the machine is shared, and interleaving spreads
  a slow spell over all configurations instead of the one being timed then.
* FWHT vs GEMM: the structured pool's two paths for d = 54, 784, 4096, 16384
  (single thread), the measurements behind ``dkrp.features._pools.FWHT_COST_RATIO``.
* RFF: kernel-approximation MSE of iid / orthogonal / structured Gaussian random
  Fourier features at equal D.

Writes ``results/pools_distortion.csv`` and ``results/pools_pareto.png``; with
``--write-results`` also its section of ``benchmarks/RESULTS.md`` (``bench_pools``, or
``bench_pools_head_to_head`` for ``--head-to-head``).

Usage::

    python benchmarks/bench_pools.py                 # everything (about 10 minutes, 2 cores)
    python benchmarks/bench_pools.py --quick         # fewer configs, 2 seeds, 10,000 rows
    python benchmarks/bench_pools.py --head-to-head --repeats 5 --write-results
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    best_of,
    command_line,
    data_dir,
    emit,
    interleaved,
    machine_description,
    mnist_train,
)

import dkrp  # noqa: E402
from dkrp.features._pools import (  # noqa: E402
    FWHT_COST_RATIO,
    padded_size,
    structured_project,
    use_fwht,
)
from dkrp.io import read_idx  # noqa: E402
from dkrp.metrics import distance_distortion, kernel_approximation_error  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"

#: The paper's Table 2 (g = 2, k = 1000, 500 MNIST test digits): (label, distortion, seconds).
PAPER_POINTS = [
    ("paper KRP p=976", 0.059, 0.079),
    ("paper KRP p=16000", 0.038, 0.609),
]
PAPER_PHI_RP = 0.035  # φ(x)+RP, k = 1000 (the floor; its time is > 1 min)

# (target, degree, k, t, pool, p, index_design)
CONFIGS = [
    ("g2k1000t30", 2, 1000, 30, "iid", 976, "random"),
    ("g2k1000t30", 2, 1000, 30, "iid", 16000, "random"),
    ("g2k1000t30", 2, 1000, 30, "tight_frame", 976, "random"),
    ("g2k1000t30", 2, 1000, 30, "tight_frame", 976, "balanced"),
    ("g2k1000t30", 2, 1000, 30, "orthogonal", 976, "random"),
    ("g2k1000t30", 2, 1000, 30, "orthogonal", 784, "random"),
    ("g2k1000t30", 2, 1000, 30, "structured", 1024, "random"),
    ("g2k1000t30", 2, 1000, 30, "structured", 1024, "balanced"),
    ("g2k1000t30", 2, 1000, 30, "structured", 976, "random"),
    ("g3k1000t30", 3, 1000, 30, "iid", 976, "random"),
    ("g3k1000t30", 3, 1000, 30, "tight_frame", 976, "random"),
    ("g3k1000t30", 3, 1000, 30, "orthogonal", 976, "random"),
    ("g3k1000t30", 3, 1000, 30, "structured", 1024, "random"),
    ("g2k200t30", 2, 200, 30, "iid", 976, "random"),
    ("g2k200t30", 2, 200, 30, "tight_frame", 976, "random"),
    ("g2k200t30", 2, 200, 30, "orthogonal", 976, "random"),
    ("g2k200t30", 2, 200, 30, "structured", 1024, "random"),
    ("g2k1000t10", 2, 1000, 10, "iid", 976, "random"),
    ("g2k1000t10", 2, 1000, 10, "tight_frame", 976, "random"),
    ("g2k1000t10", 2, 1000, 10, "tight_frame", 976, "balanced"),
    ("g2k1000t10", 2, 1000, 10, "structured", 1024, "random"),
    ("g2k1000t10", 2, 1000, 10, "structured", 1024, "balanced"),
    ("g2k1000t1", 2, 1000, 1, "iid", 976, "random"),
    ("g2k1000t1", 2, 1000, 1, "tight_frame", 976, "random"),
    ("g2k1000t1", 2, 1000, 1, "tight_frame", 976, "balanced"),
]
QUICK = {0, 2, 6, 10, 14, 18}


def mnist_test_500():
    path = data_dir() / "mnist" / "t10k-images-idx3-ubyte.gz"
    X = read_idx(path, expected_magic=2051).reshape(-1, 784)
    rows = np.random.default_rng(2018).choice(X.shape[0], 500, replace=False)
    return X[rows] / 127.5 - 1.0


def make(degree, k, t, pool, p, design, seed):
    return dkrp.PolynomialRandomProjection(
        degree=degree, n_components=k, n_hyperplanes=p, n_terms=t, pool=pool,
        index_design=design, random_state=seed,
    )


def study(configs, X500, Xbig, seeds, repeats):
    """Distortion of every configuration, then their fit and transform times, interleaved."""
    rows, ests = [], []
    for target, g, k, t, pool, p, design in configs:
        values = []
        for seed in range(seeds):
            Z = make(g, k, t, pool, p, design, seed).fit(X500).transform(X500)
            values.append(float(distance_distortion(X500, Z, degree=g)))
        ests.append(make(g, k, t, pool, p, design, 0).fit_n_features(Xbig.shape[1]))
        rows.append(dict(target=target, degree=g, n_components=k, n_terms=t, pool=pool,
                         n_hyperplanes=p, index_design=design,
                         distortion_mean=float(np.mean(values)),
                         distortion_std=float(np.std(values)),
                         distortion_per_seed=" ".join(f"{v:.4f}" for v in values)))
        print(f"{target:11s} {pool:11s} p={p:<5d} {design:8s} distortion "
              f"{rows[-1]['distortion_mean']:.4f} ± {rows[-1]['distortion_std']:.4f}", flush=True)
    # p > 4000 (p = 16000): one run (a GEMM of about a minute)
    reps = [1 if cfg[5] > 4000 else repeats for cfg in configs]
    d = Xbig.shape[1]
    for est in ests:
        est.transform(Xbig[:100])  # compile / warm outside the timings
    fit_times = interleaved([partial(est.fit_n_features, d) for est in ests], reps)
    print(f"\ntransform times, {Xbig.shape[0]} rows, {max(reps)} interleaved rounds:", flush=True)
    transform_times = interleaved([partial(est.transform, Xbig) for est in ests], reps)
    for row, est, n, fits, trs in zip(rows, ests, reps, fit_times, transform_times, strict=True):
        row.update(fit_s=float(np.median(fits)), transform_s=float(np.median(trs)),
                   transform_min_s=min(trs),
                   transform_all_s=" ".join(f"{x:.3f}" for x in trs), transform_repeats=n,
                   fwht=bool(getattr(est, "uses_fwht_", False)), n_rows_timed=Xbig.shape[0])
        print(f"{row['target']:11s} {row['pool']:11s} p={row['n_hyperplanes']:<5d} "
              f"{row['index_design']:8s} fit {row['fit_s']:6.3f}s  transform median "
              f"{row['transform_s']:6.2f}s min {row['transform_min_s']:6.2f}s (of {n})"
              f"{'  [FWHT]' if row['fwht'] else ''}", flush=True)
    return rows


def study_table(rows):
    lines = [
        "| target | pool | p | index design | distortion mean ± std | fit s (median) | "
        "transform s (median) | transform min s | rounds | FWHT |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['target']} | {r['pool']} | {r['n_hyperplanes']} | {r['index_design']} | "
            f"{r['distortion_mean']:.4f} ± {r['distortion_std']:.4f} | {r['fit_s']:.3f} | "
            f"{r['transform_s']:.2f} | {r['transform_min_s']:.2f} | {r['transform_repeats']} | "
            f"{'yes' if r['fwht'] else 'no'} |"
        )
    return "\n".join(lines)


#: The head-to-head configurations (pool, p, t) and issue 5's targets on the transform time
#: relative to the iid pool at t = 30: ≤ 1.05× at t = 30, the stretch ≤ 0.65× at t = 10.
HEAD_TO_HEAD = [("iid", 976, 30), ("tight_frame", 976, 30), ("structured", 1024, 30),
                ("structured", 1024, 10), ("tight_frame", 976, 10)]
TARGET = {30: 1.05, 10: 0.65}


def head_to_head(Xbig, repeats):
    """Transform times, the configurations alternating within each round; median per config."""
    ests = [make(2, 1000, t, pool, p, "random", 0).fit_n_features(Xbig.shape[1])
            for pool, p, t in HEAD_TO_HEAD]
    for est in ests:
        est.transform(Xbig[:100])  # compile / warm outside the timings
    times = interleaved([partial(est.transform, Xbig) for est in ests], repeats)
    base = float(np.median(times[0]))
    out = []
    print(f"\nHead to head, g=2 k=1000, {Xbig.shape[0]} x {Xbig.shape[1]}, {repeats} "
          "interleaved rounds, median:")
    for (pool, p, t), ts in zip(HEAD_TO_HEAD, times, strict=True):
        paired = [x / b for x, b in zip(ts, times[0], strict=True)]  # same round's iid
        out.append(dict(pool=pool, p=p, t=t, median=float(np.median(ts)), min=min(ts),
                        ratio=float(np.median(ts)) / base, paired=paired, all=ts))
        print(f"  {pool:11s} p={p:<5d} t={t:<3d} {np.median(ts):6.2f}s  "
              f"({np.median(ts) / base:.2f}x iid t=30)   all: {' '.join(f'{x:.2f}' for x in ts)}")
    return out


def head_to_head_text(res, n_rows, source, repeats):
    lines = [
        f"Input: {n_rows:,} × 784 {source}, float64, all usable cores; "
        "`fit_n_features(784)` then `transform`, compiled and warmed outside the timings. "
        f"{repeats} rounds; within each round every configuration runs once, the order "
        "rotated by one each round. Figures are the median over rounds; \"paired\" is each "
        "round's time over the iid pool's time in the same round.",
        "",
        "| pool | p | t | median s | × iid t=30 (medians) | paired ratio min – median – max "
        "| min s | all rounds (s) |",
        "|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in res:
        pr = r["paired"]
        lines.append(
            f"| {r['pool']} | {r['p']} | {r['t']} | {r['median']:.3f} | {r['ratio']:.2f} | "
            f"{min(pr):.2f} – {np.median(pr):.2f} – {max(pr):.2f} | {r['min']:.3f} | "
            + " ".join(f"{x:.3f}" for x in r["all"]) + " |"
        )
    lines.append("")
    for r in res[1:]:
        target = TARGET[r["t"]]
        met = "met" if r["ratio"] <= target else "NOT met"
        rounds = sum(x <= target for x in r["paired"])
        kind = "target" if r["t"] == 30 else "stretch target"
        lines.append(
            f"- {r['pool']} p={r['p']} t={r['t']}: {kind} ≤ {target:.2f}× iid t=30 → {met} "
            f"({r['ratio']:.2f}× on the medians; paired ratio within the target in {rounds} of "
            f"{len(r['paired'])} rounds)."
        )
    return "\n".join(lines)


def fwht_vs_gemm(repeats):
    """Single-thread time of the structured pool's two paths, n rows × one block."""
    print("\nFWHT vs GEMM for the structured pool (single thread, p = D, min of "
          f"{repeats}); rule use_fwht with FWHT_COST_RATIO = {FWHT_COST_RATIO}")
    print(f"{'d':>6s} {'D':>6s} {'rows':>6s} {'GEMM s':>8s} {'FWHT s':>8s} {'GEMM/FWHT':>9s} "
          f"{'rule':>5s}")
    rng = np.random.default_rng(0)
    out = []
    with threadpool_limits(1, "blas"):
        for d in (54, 784, 4096, 16384):
            D = padded_size(d)
            n = max(256, 2**22 // D)
            X = rng.standard_normal((n, d))
            signs = rng.choice(np.array([-1, 1], dtype=np.int8), (1, 3, D))
            S = rng.standard_normal((D, d))
            structured_project(X[:2], signs, D)  # compile
            t_f = best_of(partial(structured_project, X, signs, D), repeats)
            t_g = best_of(partial(np.matmul, X, S.T), repeats)
            rule = "FWHT" if use_fwht(d, D) else "GEMM"
            print(f"{d:6d} {D:6d} {n:6d} {t_g:8.4f} {t_f:8.4f} {t_g / t_f:9.2f} {rule:>5s}")
            out.append((d, D, n, t_g, t_f, rule))
    return out


def rff_variance(X500, seeds, D=1024):
    print(f"\nRandom Fourier features, Gaussian kernel, gamma='scale', D = {D} (cos_sin), "
          f"500 MNIST test digits, {seeds} seeds: kernel MSE (mean ± std)")
    base, out = None, []
    for pool in ("iid", "orthogonal", "structured"):
        mses = []
        for seed in range(seeds):
            est = dkrp.RandomFourierFeatures(gamma="scale", n_components=D, feature_map="cos_sin",
                                             pool=pool, random_state=seed).fit(X500)
            mses.append(kernel_approximation_error(X500, est.transform(X500), kernel="gaussian",
                                                   gamma=est.gamma_).mse)
        base = base or np.mean(mses)
        print(f"  {pool:11s} MSE {np.mean(mses):.3e} ± {np.std(mses):.1e}  "
              f"({np.mean(mses) / base:.2f}× iid)")
        out.append((pool, float(np.mean(mses)), float(np.std(mses)), float(np.mean(mses) / base)))
    return out


def pareto_plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    markers = {"iid": "o", "tight_frame": "s", "orthogonal": "^", "structured": "D"}
    colors = {"g2k1000t30": "C0", "g2k1000t10": "C1", "g2k1000t1": "C4", "g2k200t30": "C2",
              "g3k1000t30": "C3"}
    for r in rows:
        ax.errorbar(r["transform_s"], r["distortion_mean"], yerr=r["distortion_std"],
                    marker=markers[r["pool"]], color=colors[r["target"]], linestyle="none",
                    mfc="none" if r["index_design"] == "balanced" else colors[r["target"]])
        ax.annotate(f"{r['pool']} p={r['n_hyperplanes']}"
                    f"{' bal' if r['index_design'] == 'balanced' else ''}",
                    (r["transform_s"], r["distortion_mean"]), fontsize=6,
                    xytext=(3, 2), textcoords="offset points")
    ax2 = ax.twiny()
    for label, dist, secs in PAPER_POINTS:
        ax2.plot(secs, dist, "k*", ms=12)
        ax2.annotate(label + " (Table 2)", (secs, dist), fontsize=7, xytext=(4, -10),
                     textcoords="offset points")
    ax.axhline(PAPER_PHI_RP, color="k", ls="--", lw=0.8)
    ax.text(ax.get_xlim()[0], PAPER_PHI_RP, " paper φ(x)+RP, k=1000: 0.035", fontsize=7,
            va="bottom")
    ax2.set_xlim(0, 0.7)
    ax2.set_xlabel("paper's time for 500 test digits [s] (black stars; other machine)")
    ax.set_xlabel(f"dkrp transform time, {rows[0]['n_rows_timed']} × 784 MNIST [s] "
                  "(median of interleaved rounds)")
    ax.set_ylabel("mean distance distortion (500 MNIST test digits, mean ± std over seeds)")
    ax.set_yscale("log")
    handles = [plt.Line2D([], [], color=c, marker="o", ls="none", label=t)
               for t, c in colors.items()]
    handles += [plt.Line2D([], [], color="gray", marker=m, ls="none", label=p)
                for p, m in markers.items()]
    ax.legend(handles=handles, fontsize=7, loc="upper right")
    ax.set_title("KRP hyperplane pools: distortion vs time (hollow = balanced indices)")
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def study_text(rows, fwht, rff, args, n_rows, source, repeats):
    lines = [
        f"Distortion: 500 MNIST test digits, {args.seeds} pool seeds. Time: {n_rows:,} × 784 "
        f"{source}, float64, all usable cores; {repeats} interleaved rounds (configurations "
        "alternate within each round, the order rotated each round; p > 4000: one round); "
        "median per configuration. Per-row figures: `results/pools_distortion.csv`, plot "
        "`results/pools_pareto.png`.",
        "",
        study_table(rows),
        "",
        f"FWHT vs GEMM for the structured pool (single thread, p = D, min of {repeats}); "
        f"rule `use_fwht` with `FWHT_COST_RATIO = {FWHT_COST_RATIO}`:",
        "",
        "| d | D | rows | GEMM s | FWHT s | GEMM / FWHT | rule | faster path |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for d, D, n, t_g, t_f, rule in fwht:
        faster = "FWHT" if t_f < t_g else "GEMM"
        lines.append(f"| {d} | {D} | {n} | {t_g:.4f} | {t_f:.4f} | {t_g / t_f:.2f} | {rule} | "
                     f"{faster}{'' if faster == rule else ' (rule disagrees)'} |")
    lines += [
        "",
        "Random Fourier features, Gaussian kernel, gamma='scale', D = 1024 (cos_sin), 500 MNIST "
        f"test digits, {args.seeds} seeds: kernel MSE",
        "",
        "| pool | MSE mean | MSE std | × iid |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {pool} | {m:.3e} | {sd:.1e} | {ratio:.2f} |" for pool, m, sd, ratio in rff]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=60000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--head-to-head", action="store_true",
                        help="only the interleaved timing of iid vs frame pools")
    parser.add_argument("--write-results", action="store_true",
                        help="replace this run's section of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    if args.head_to_head:
        print(machine_description())
        Xbig, source = mnist_train(args.rows)
        res = head_to_head(Xbig, args.repeats)
        title = (f"Hyperplane pools, transform time head to head (issue 5 target: ≤ 1.05× iid), "
                 f"{Xbig.shape[0]:,} × 784 MNIST, g=2, k=1000")
        emit("bench_pools_head_to_head", title,
             head_to_head_text(res, Xbig.shape[0], source, args.repeats),
             command_line("bench_pools.py", parser, args), args.write_results)
        return
    configs = CONFIGS
    if args.quick:
        configs = [c for i, c in enumerate(CONFIGS) if i in QUICK]
        args.seeds, args.rows, args.repeats = 2, 10000, 1
    print(machine_description())
    Xbig, what = mnist_train(args.rows)
    print(f"timing input: {Xbig.shape[0]} × {Xbig.shape[1]} {what}, float64; "
          f"{time.strftime('%Y-%m-%d %H:%M')}\n")
    X500 = mnist_test_500()
    rows = study(configs, X500, Xbig, args.seeds, args.repeats)
    fwht = fwht_vs_gemm(args.repeats)
    rff = rff_variance(X500, args.seeds)
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "pools_distortion.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    pareto_plot(rows, RESULTS / "pools_pareto.png")
    print(f"\nwrote {RESULTS / 'pools_distortion.csv'} and {RESULTS / 'pools_pareto.png'}")
    title = (f"Hyperplane pools: distortion, time, FWHT vs GEMM, RFF variance"
             f"{' (quick subset of configurations)' if args.quick else ''}")
    emit("bench_pools", title,
         study_text(rows, fwht, rff, args, Xbig.shape[0], what, args.repeats),
         command_line("bench_pools.py", parser, args), args.write_results)


if __name__ == "__main__":
    main()
