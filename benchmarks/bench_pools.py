"""Hyperplane pools for KRP (issue 5): distortion, transform time, FWHT vs GEMM, RFF variance.

* Distortion: mean distance distortion (eqs. 18-19 of López-Sánchez et al. 2018) on
  the 500 MNIST test digits of the paper's protocol (x/127.5 - 1, rows chosen with
  ``default_rng(2018)`` as in tests/conftest.py), over ``--seeds`` pool draws.
* Time: fit and transform of the 60,000 × 784 MNIST training images (float64, all
  usable cores), each the minimum of ``--repeats`` runs: the machine is shared,
  so single timings are noisy and the minimum is the least disturbed run.
* FWHT vs GEMM: the structured pool's two paths for d = 54, 784, 4096, 16384
  (single thread), the measurements behind ``dkrp.features._pools.FWHT_COST_RATIO``.
* RFF: kernel-approximation MSE of iid / orthogonal / structured Gaussian random
  Fourier features at equal D.

Writes ``results/pools_distortion.csv`` and ``results/pools_pareto.png``.

Usage::

    python benchmarks/bench_pools.py                 # everything (about 10 minutes, 2 cores)
    python benchmarks/bench_pools.py --quick         # fewer configs, 2 seeds, 10,000 rows
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
from _common import best_of, data_dir, machine_description, mnist_train  # noqa: E402

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
    rows = []
    for target, g, k, t, pool, p, design in configs:
        values = []
        for seed in range(seeds):
            Z = make(g, k, t, pool, p, design, seed).fit(X500).transform(X500)
            values.append(float(distance_distortion(X500, Z, degree=g)))
        est = make(g, k, t, pool, p, design, 0)
        fit_s = best_of(partial(est.fit_n_features, Xbig.shape[1]), repeats)
        reps = 1 if p > 4000 else repeats  # p = 16000: one run (a GEMM of ~20 s)
        transform_s = best_of(partial(est.transform, Xbig), reps)
        row = dict(target=target, degree=g, n_components=k, n_terms=t, pool=pool,
                   n_hyperplanes=p, index_design=design,
                   distortion_mean=float(np.mean(values)), distortion_std=float(np.std(values)),
                   distortion_per_seed=" ".join(f"{v:.4f}" for v in values),
                   fit_s=fit_s, transform_s=transform_s, transform_repeats=reps,
                   fwht=bool(getattr(est, "uses_fwht_", False)), n_rows_timed=Xbig.shape[0])
        rows.append(row)
        print(f"{target:11s} {pool:11s} p={p:<5d} {design:8s} distortion "
              f"{row['distortion_mean']:.4f} ± {row['distortion_std']:.4f}  fit "
              f"{fit_s:6.3f}s  transform {transform_s:6.2f}s (min of {reps})"
              f"{'  [FWHT]' if row['fwht'] else ''}", flush=True)
    return rows


def head_to_head(Xbig, repeats):
    """Interleaved transform timings (round-robin, min per config): fairer on a shared machine."""
    configs = [("iid", 976, 30), ("tight_frame", 976, 30), ("structured", 1024, 30),
               ("structured", 1024, 10), ("tight_frame", 976, 10)]
    ests = [make(2, 1000, t, pool, p, "random", 0).fit_n_features(Xbig.shape[1])
            for pool, p, t in configs]
    times = [[] for _ in configs]
    for _ in range(repeats):
        for i, est in enumerate(ests):
            t0 = time.perf_counter()
            est.transform(Xbig)
            times[i].append(time.perf_counter() - t0)
    base = min(times[0])
    print(f"\nHead to head, g=2 k=1000, {Xbig.shape[0]} x 784, round-robin x{repeats}, min:")
    for (pool, p, t), ts in zip(configs, times, strict=True):
        print(f"  {pool:11s} p={p:<5d} t={t:<3d} {min(ts):6.2f}s  ({min(ts) / base:.2f}x iid t=30)"
              f"   all: {' '.join(f'{x:.2f}' for x in ts)}")


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
            out.append((d, D, n, t_g, t_f))
    return out


def rff_variance(X500, seeds, D=1024):
    print(f"\nRandom Fourier features, Gaussian kernel, gamma='scale', D = {D} (cos_sin), "
          f"500 MNIST test digits, {seeds} seeds: kernel MSE (mean ± std)")
    base = None
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
                  "(min of repeats, shared 2-core machine)")
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=60000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--head-to-head", action="store_true",
                        help="only the interleaved timing of iid vs frame pools")
    args = parser.parse_args(argv)
    if args.head_to_head:
        print(machine_description())
        head_to_head(mnist_train(args.rows)[0], args.repeats)
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
    fwht_vs_gemm(args.repeats)
    rff_variance(X500, args.seeds)
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "pools_distortion.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    pareto_plot(rows, RESULTS / "pools_pareto.png")
    print(f"\nwrote {RESULTS / 'pools_distortion.csv'} and {RESULTS / 'pools_pareto.png'}")


if __name__ == "__main__":
    main()
