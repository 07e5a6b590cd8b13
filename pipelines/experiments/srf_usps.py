"""Issue 12 experiments: SRF surrogate floors, USPS kernel MSE vs D, linear SVM vs exact SVC.

Usage (from the repository root; USPS needs h5py, and DKRP_DATA_DIR when run outside
the main checkout)::

    python pipelines/experiments/srf_usps.py floors
    python pipelines/experiments/srf_usps.py mse --degrees 3 10 20 --seeds 10
    python pipelines/experiments/srf_usps.py svm --degree 10 --n-components 4096

Writes CSV (and a PNG for ``mse``) to ``results/srf/``. The kernel is
:math:`((a^2/2 - 1 + \\langle x, y\\rangle)/(a^2/2))^p` on L2-normalised rows, i.e.
``(gamma <x, y> + coef0)^p`` with ``gamma = 2/a^2``, ``coef0 = 1 - 2/a^2`` for the
Random Maclaurin, TensorSketch and exact-SVC baselines.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import dkrp
from dkrp.datasets import load_usps as load_usps_split
from dkrp.features import _srf_fit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_csv  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "results" / "srf"


def load_usps():
    X_train, y_train = load_usps_split("train")
    X_test, y_test = load_usps_split("test")
    return X_train, y_train, X_test, y_test


def normalise(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def write(name, rows):
    write_csv(OUT, name, rows)


def floors(args):
    rows = []
    for d in args.dims:
        for a in args.scales:
            for p in args.degrees:
                _srf_fit.fit_surrogate.cache_clear()
                t0 = time.perf_counter()
                fit = _srf_fit.fit_surrogate(d, p, a, args.n_terms)
                seconds = time.perf_counter() - t0
                z = np.linspace(0, 2, 1001)
                khat = _srf_fit.surrogate_kernel(z, fit.sigma, fit.coef, d, p, a)
                err = float(np.abs(khat - _srf_fit.polynomial_kernel(z, p, a)).max())
                rows.append({"d": d, "scale": a, "degree": p, "max_error": f"{err:.5g}",
                             "mass": f"{fit.mass:.6f}", "finite": bool(np.isfinite(khat).all()),
                             "fit_seconds": f"{seconds:.3f}"})
                print(rows[-1], flush=True)
    write("floors.csv", rows)


def mse(args):
    Xtr, _, _, _ = load_usps()
    X = normalise(Xtr[np.random.default_rng(0).choice(len(Xtr), 400, replace=False)])
    gamma, coef0 = 2.0 / args.scale**2, 1.0 - 2.0 / args.scale**2
    G = X @ X.T
    rows = []
    for p in args.degrees:
        K = (gamma * G + coef0) ** p
        makers = {
            "srf": lambda D, s, p=p: dkrp.SphericalRandomFeatures(degree=p, scale=args.scale,
                                                             n_components=D, random_state=s),
            "maclaurin": lambda D, s, p=p: dkrp.RandomMaclaurin(degree=p, gamma=gamma, coef0=coef0,
                                                           n_components=D, random_state=s),
            "tensorsketch": lambda D, s, p=p: dkrp.TensorSketch(kernel="polynomial", degree=p,
                                                           gamma=gamma, coef0=coef0,
                                                           n_components=D, random_state=s),
        }
        for D in [2**k for k in range(9, 15)]:
            for name, make in makers.items():
                errs = []
                for s in range(args.seeds):
                    Z = make(D, s).fit(X).transform(X)
                    errs.append(float(np.mean((Z @ Z.T - K) ** 2)))
                rows.append({"degree": p, "D": D, "method": name, "mse_mean": np.mean(errs),
                             "mse_sd": np.std(errs, ddof=1), "seeds": args.seeds})
                print(rows[-1], flush=True)
        # the surrogate's own floor: MSE of K_hat against K on these pairs
        est = makers["srf"](512, 0).fit(X)
        z = np.sqrt(np.maximum(2 - 2 * G, 0.0))
        khat = est.surrogate_kernel(z.ravel()).reshape(z.shape)
        rows.append({"degree": p, "D": 0, "method": "srf_surrogate_bias^2",
                     "mse_mean": float(np.mean((khat - K) ** 2)), "mse_sd": 0.0, "seeds": 0})
    write(f"mse_a{args.scale:g}.csv", rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.degrees), figsize=(4.5 * len(args.degrees), 4))
    for ax, p in zip(np.atleast_1d(axes), args.degrees, strict=True):
        for name in ["srf", "maclaurin", "tensorsketch"]:
            sel = [r for r in rows if r["degree"] == p and r["method"] == name]
            ax.loglog([r["D"] for r in sel], [r["mse_mean"] for r in sel], "o-", label=name)
        bias = [r for r in rows if r["degree"] == p and r["method"].startswith("srf_surr")][0]
        ax.axhline(bias["mse_mean"], ls=":", c="C0", label="SRF surrogate bias²")
        ax.set(title=f"USPS 400 digits, p={p}, a={args.scale:g}", xlabel="D",
               ylabel="kernel MSE")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / f"mse_a{args.scale:g}.png", dpi=120)
    print(f"wrote {OUT / f'mse_a{args.scale:g}.png'}")


def svm(args):
    from sklearn.svm import SVC, LinearSVC

    Xtr, ytr, Xte, yte = load_usps()
    Xtr, Xte = normalise(Xtr), normalise(Xte)
    gamma, coef0 = 2.0 / args.scale**2, 1.0 - 2.0 / args.scale**2
    rows = []
    t0 = time.perf_counter()
    exact = SVC(kernel="poly", degree=args.degree, gamma=gamma, coef0=coef0, C=args.C)
    acc = exact.fit(Xtr, ytr).score(Xte, yte)
    rows.append({"model": "exact poly SVC", "degree": args.degree, "D": "", "seed": "",
                 "accuracy": acc, "seconds": time.perf_counter() - t0})
    print(rows[-1], flush=True)
    for seed in range(args.seeds):
        t0 = time.perf_counter()
        srf = dkrp.SphericalRandomFeatures(degree=args.degree, scale=args.scale,
                                           n_components=args.n_components, random_state=seed)
        Ztr = srf.fit(Xtr).transform(Xtr)
        Zte = srf.transform(Xte)
        clf = LinearSVC(C=args.C, dual=True, max_iter=5000).fit(Ztr, ytr)
        rows.append({"model": "SRF + LinearSVC", "degree": args.degree, "D": args.n_components,
                     "seed": seed, "accuracy": clf.score(Zte, yte),
                     "seconds": time.perf_counter() - t0})
        print(rows[-1], flush=True)
    write(f"svm_p{args.degree}_D{args.n_components}.csv", rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("floors")
    f.add_argument("--dims", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    f.add_argument("--scales", type=float, nargs="+", default=[2.0, 3.0, 4.0])
    f.add_argument("--degrees", type=int, nargs="+", default=[3, 7, 10, 20])
    f.add_argument("--n-terms", type=int, default=10)
    m = sub.add_parser("mse")
    m.add_argument("--degrees", type=int, nargs="+", default=[3, 10, 20])
    m.add_argument("--scale", type=float, default=4.0)
    m.add_argument("--seeds", type=int, default=10)
    s = sub.add_parser("svm")
    s.add_argument("--degree", type=int, default=10)
    s.add_argument("--scale", type=float, default=4.0)
    s.add_argument("--n-components", type=int, default=4096)
    s.add_argument("--C", type=float, default=1.0)
    s.add_argument("--seeds", type=int, default=1)
    args = ap.parse_args()
    {"floors": floors, "mse": mse, "svm": svm}[args.cmd](args)


if __name__ == "__main__":
    main()
