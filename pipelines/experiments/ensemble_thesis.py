"""Issue 14 experiments: the thesis' RFF voting ensemble (Rost & Zast 2023, section 5.4).

On 2x2 max-pooled (14x14), [0, 1]-normalised MNIST (and Fashion-MNIST), with
``gamma = 1/(d Var X)`` fixed from the training rows:

* ``rff``: accuracy and training time of one voter (the mean over the ensemble's
  voters) and of the 13-voter majority as the number of RFF grows;
* ``voters``: accuracy of the majority of the first k voters, k = 1..K, for
  200/300/500 RFF (voter i does not depend on K: its seeds come from the ensemble
  seed and i alone, so one K-voter fit gives every k);
* ``baselines``: an exact RBF-kernel SVC and a linear SVM on the pooled pixels,
  measured in the same run;
* ``solvers``: one voter's linear model, LinearSVC primal vs dual vs SGD (hinge).

Usage (from the repository root; DKRP_DATA_DIR names the data folder)::

    python pipelines/experiments/ensemble_thesis.py --quick      # a few CPU minutes
    python pipelines/experiments/ensemble_thesis.py --datasets mnist fashion-mnist \\
        --n-train 20000 --rff 50 100 200 300 500 1000 2000 5000 --max-voters 25

Writes ``results/ensemble/{rff,voters,baselines,solvers}.csv`` and ``ensemble.png``.
Voters train on an embedded LocalCluster (``--n-workers``) as the library does;
times are wall-clock seconds on this machine, shared with whatever else runs on it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import write_csv  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "results" / "ensemble"


def load(name, n_train, n_test, seed):
    from dkrp.datasets import load_fashion_mnist, load_mnist, max_pool

    loader = load_mnist if name == "mnist" else load_fashion_mnist
    X, y = loader("train", scale="[0,1]")
    Xt, yt = loader("test", scale="[0,1]")
    rng = np.random.default_rng(seed)
    tr = rng.choice(len(X), n_train, replace=False) if n_train < len(X) else np.arange(len(X))
    te = rng.choice(len(Xt), n_test, replace=False) if n_test < len(Xt) else np.arange(len(Xt))
    return max_pool(X[tr]), y[tr], max_pool(Xt[te]), yt[te]


def write(name, rows):
    write_csv(OUT, name, rows)


def majority_curve(votes, y, classes):
    from dkrp.ensemble import hard_vote

    idx = np.searchsorted(classes, votes)
    return [float((classes[hard_vote(idx[:, :k], len(classes))] == y).mean())
            for k in range(1, votes.shape[1] + 1)]


def run(args):
    from distributed import Client

    from dkrp.ensemble import RandomFeatureVotingClassifier, make_model
    from dkrp.kernels import scale_gamma
    from dkrp.parallel import start_local_cluster

    rows_rff, rows_voters, rows_base, rows_solver = [], [], [], []
    with start_local_cluster(n_workers=args.n_workers, threads_per_worker=1) as cluster, \
            Client(cluster) as client:
        for name in args.datasets:
            Xtr, ytr, Xte, yte = load(name, args.n_train, args.n_test, args.seed)
            gamma = scale_gamma(Xtr)
            common = {"dataset": name, "n_train": len(ytr), "n_test": len(yte),
                      "gamma": f"{gamma:.5g}"}
            print(f"{name}: {len(ytr)} train, {len(yte)} test, 196 pooled pixels, "
                  f"gamma {gamma:.4g}", flush=True)
            # baselines, same run
            from sklearn.svm import SVC, LinearSVC

            for label, model in (("exact RBF SVC", SVC(kernel="rbf", gamma=gamma, C=args.C)),
                                 ("linear SVM, pixels", LinearSVC(C=args.C))):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model.fit(Xtr, ytr)
                seconds = time.perf_counter() - t0
                acc = float((model.predict(Xte) == yte).mean())
                rows_base.append({**common, "model": label, "accuracy": f"{acc:.4f}",
                                  "train_seconds": f"{seconds:.2f}"})
                print(rows_base[-1], flush=True)
            # accuracy and time vs RFF: one voter (mean of the ensemble's) vs the majority
            fitted = {}
            for D in args.rff:
                model = RandomFeatureVotingClassifier(n_voters=args.voters, n_components=D,
                                                      gamma=gamma, C=args.C,
                                                      random_state=args.seed)
                model.fit(Xtr, ytr, client=client)
                votes = model.predict_voters(Xte)
                single = (votes == yte[:, None]).mean(axis=0)
                voter_s = np.array([i["seconds"] for i in model.voter_info_])
                rows_rff.append({
                    **common, "n_components": D, "n_voters": args.voters,
                    "ensemble_accuracy": f"{model.score(Xte, yte):.4f}",
                    "voter_accuracy_mean": f"{single.mean():.4f}",
                    "voter_accuracy_min": f"{single.min():.4f}",
                    "voter_accuracy_max": f"{single.max():.4f}",
                    "ensemble_train_seconds": f"{model.fit_seconds_:.2f}",
                    "voter_train_seconds_mean": f"{voter_s.mean():.2f}",
                    "solver": model.voter_info_[0]["solver"],
                    "n_workers": args.n_workers,
                })
                print(rows_rff[-1], flush=True)
                fitted[D] = model
            # accuracy vs number of voters
            for D in args.voter_rff:
                model = RandomFeatureVotingClassifier(n_voters=args.max_voters, n_components=D,
                                                      gamma=gamma, C=args.C,
                                                      random_state=args.seed)
                model.fit(Xtr, ytr, client=client)
                votes = model.predict_voters(Xte)
                for k, acc in enumerate(majority_curve(votes, yte, model.classes_), start=1):
                    rows_voters.append({**common, "n_components": D, "n_voters": k,
                                        "accuracy": f"{acc:.4f}"})
                print({**common, "n_components": D,
                       "by_voters": [r["accuracy"] for r in rows_voters[-args.max_voters:]]},
                      flush=True)
            # the linear solver of one voter
            if args.solver_rff:
                from dkrp import RandomFourierFeatures

                D = args.solver_rff
                Z = RandomFourierFeatures(gamma=gamma, n_components=D,
                                          random_state=args.seed).fit(Xtr)
                Ztr, Zte = Z.transform(Xtr), Z.transform(Xte)
                for solver in ("primal", "dual", "sgd"):
                    svm = make_model(solver, args.C, len(ytr), D, 0)
                    t0 = time.perf_counter()
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        svm.fit(Ztr, ytr)
                    seconds = time.perf_counter() - t0
                    rows_solver.append({
                        **common, "n_components": D, "solver": solver,
                        "model": repr(svm).replace("\n", " "),
                        "accuracy": f"{(svm.predict(Zte) == yte).mean():.4f}",
                        "train_seconds": f"{seconds:.2f}",
                        "converged": not any("converge" in str(w.message) for w in caught)})
                    print(rows_solver[-1], flush=True)
    write("rff.csv", rows_rff)
    write("voters.csv", rows_voters)
    write("baselines.csv", rows_base)
    if rows_solver:
        write("solvers.csv", rows_solver)
    (OUT / "run.json").write_text(json.dumps(vars(args), indent=1))
    plot(rows_rff, rows_voters, rows_base)


def plot(rows_rff, rows_voters, rows_base):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({r["dataset"] for r in rows_rff})
    fig, axes = plt.subplots(len(datasets), 3, figsize=(15, 4 * len(datasets)), squeeze=False)
    for row, name in zip(axes, datasets, strict=True):
        rff = [r for r in rows_rff if r["dataset"] == name]
        base = {r["model"]: r for r in rows_base if r["dataset"] == name}
        D = [r["n_components"] for r in rff]
        ax = row[0]
        ax.plot(D, [float(r["ensemble_accuracy"]) for r in rff], "o-", color="tab:red",
                label=f"majority of {rff[0]['n_voters']} voters")
        ax.plot(D, [float(r["voter_accuracy_mean"]) for r in rff], "o-", color="tab:blue",
                label="single voter (mean)")
        for label, style in (("exact RBF SVC", "k--"), ("linear SVM, pixels", "k:")):
            ax.axhline(float(base[label]["accuracy"]), linestyle=style[1:], color="k",
                       label=label)
        ax.set(xscale="log", xlabel="RFF per voter", ylabel="test accuracy",
               title=f"{name} (pooled 14x14): accuracy")
        ax.legend(fontsize=8)
        ax = row[1]
        ax.plot(D, [float(r["ensemble_train_seconds"]) for r in rff], "o-", color="tab:red",
                label="ensemble (cluster wall time)")
        ax.plot(D, [float(r["voter_train_seconds_mean"]) for r in rff], "o-",
                color="tab:blue", label="single voter (mean task time)")
        ax.axhline(float(base["exact RBF SVC"]["train_seconds"]), linestyle="--", color="k",
                   label="exact RBF SVC")
        ax.set(xscale="log", yscale="log", xlabel="RFF per voter", ylabel="train seconds",
               title=f"{name}: training time")
        ax.legend(fontsize=8)
        ax = row[2]
        for D in sorted({r["n_components"] for r in rows_voters if r["dataset"] == name}):
            pts = [r for r in rows_voters if r["dataset"] == name and r["n_components"] == D]
            ax.plot([r["n_voters"] for r in pts], [float(r["accuracy"]) for r in pts],
                    label=f"{D} RFF")
        ax.axhline(float(base["exact RBF SVC"]["accuracy"]), linestyle="--", color="k",
                   label="exact RBF SVC")
        ax.set(xlabel="voters", ylabel="test accuracy", title=f"{name}: accuracy vs voters")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "ensemble.png", dpi=110)
    print(f"wrote {OUT / 'ensemble.png'}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="5,000 training rows, MNIST only, RFF 50..500, up to 25 voters")
    p.add_argument("--datasets", nargs="+", default=["mnist", "fashion-mnist"])
    p.add_argument("--n-train", type=int, default=20000)
    p.add_argument("--n-test", type=int, default=10000)
    p.add_argument("--rff", type=int, nargs="+",
                   default=[50, 100, 200, 300, 500, 1000, 2000, 5000])
    p.add_argument("--voters", type=int, default=13)
    p.add_argument("--voter-rff", type=int, nargs="+", default=[200, 300, 500])
    p.add_argument("--max-voters", type=int, default=100)
    p.add_argument("--solver-rff", type=int, default=500)
    p.add_argument("--C", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-workers", type=int, default=2)
    args = p.parse_args(argv)
    if args.quick:
        args.datasets, args.n_train, args.n_test = ["mnist"], 5000, 2000
        args.rff, args.voter_rff, args.max_voters = [50, 100, 300, 500], [200, 300], 25
    run(args)


if __name__ == "__main__":
    main()
