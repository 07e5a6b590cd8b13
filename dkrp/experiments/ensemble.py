r"""``ensemble``: the thesis' RFF voting ensemble (Rost & Zast 2023, sections 2.4 and 5.4).

On 2x2 max-pooled (14x14), [0, 1]-normalised MNIST and Fashion-MNIST, with
``gamma = 1/(d Var X)`` fixed from the training rows, :class:`dkrp.ensemble.
RandomFeatureVotingClassifier` (RFF + ``LinearSVC`` voters, hard majority vote):

``baselines``
    an exact RBF-kernel ``SVC`` (``rbf-svm``) and a linear SVM on the pooled pixels
    (``linear-svm-raw``), measured in the same run.
``rff``
    for each number of RFF per voter ``n_components``: the majority of ``n_voters``
    voters (``rff-ensemble``) and one voter (``rff-voter``: the mean over the
    ensemble's voters, with their min and max), accuracy and training time.
``voters``
    accuracy of the majority of the first ``k`` voters, ``k = 1..max_voters``, for each
    of ``voter_rff``. Voter ``i`` depends only on the ensemble seed and ``i`` (the seed
    contract), so one ``max_voters`` fit gives every ``k``.
``single``
    one RFF map with the ensemble's *total* dimension ``k * n_components`` and one
    ``LinearSVC`` (``rff-svm``), for ``k`` in ``single_voters``: is the vote better
    than spending the same number of features on one model?

Accuracy in percent on the test rows; ``n_features`` is the total RFF dimension of the
model (``n_voters * n_components`` for an ensemble).
"""

from __future__ import annotations

import warnings

import numpy as np

from ._outputs import save_figure
from ._protocol import Experiment, timer

__all__ = ["EXPERIMENT"]


def _load(name, n_train, n_test, seed):
    """Pooled (14x14) rows of MNIST or Fashion-MNIST in [0, 1], subsampled by ``seed``."""
    from ..datasets import max_pool
    from ._data import load_split, subsample

    split = load_split("mnist-01" if name == "mnist" else name)
    X, y = subsample(split.X_train, split.y_train, n_train, seed)
    X_test, y_test = subsample(split.X_test, split.y_test, n_test, seed)
    return max_pool(X), y, max_pool(X_test), y_test


def majority_curve(votes, y, classes):
    """Accuracy (percent) of the majority of the first k voters, k = 1 .. n_voters."""
    from ..ensemble import hard_vote

    idx = np.searchsorted(classes, votes)
    return [100.0 * float((classes[hard_vote(idx[:, :k], len(classes))] == y).mean())
            for k in range(1, votes.shape[1] + 1)]


def run(ctx):
    from ..kernels import scale_gamma

    params = ctx.params
    parts = params["parts"]
    for name in params["datasets"]:
        X_train, y_train, X_test, y_test = _load(name, params["n_train"], params["n_test"],
                                                 seed=2018)
        gamma = scale_gamma(X_train)
        ctx.report(f"ensemble on {name}: {len(y_train)} train / {len(y_test)} test pooled "
                   f"rows (196 pixels), gamma {gamma:.4g}")
        common = {"dataset": name, "n_train": len(y_train), "n_test": len(y_test),
                  "gamma": gamma, "C": params["C"]}
        data = (X_train, y_train, X_test, y_test)
        if "baselines" in parts:
            yield from _baselines(ctx, common, data, gamma)
        for seed in ctx.seeds():
            if "rff" in parts:
                yield from _rff(ctx, common, data, gamma, seed)
            if "voters" in parts:
                yield from _voters(ctx, common, data, gamma, seed)
            if "single" in parts:
                yield from _single(ctx, common, data, gamma, seed)


def _baselines(ctx, common, data, gamma):
    from sklearn.svm import SVC, LinearSVC

    X_train, y_train, X_test, y_test = data
    C = ctx.params["C"]
    for method, model in (("rbf-svm", SVC(kernel="rbf", gamma=gamma, C=C)),
                          ("linear-svm-raw", LinearSVC(C=C, random_state=0))):
        with timer() as t, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X_train, y_train)
        acc = 100.0 * float((model.predict(X_test) == y_test).mean())
        ctx.report(f"  {method}: {acc:.2f} %")
        yield {**common, "part": "baselines", "method": method, "n_components": "",
               "n_voters": "", "n_features": "", "seed": ctx.seed, "accuracy": acc,
               "train_seconds": t["seconds"]}


def _ensemble(ctx, gamma, n_voters, D, seed, X_train, y_train):
    from ..ensemble import RandomFeatureVotingClassifier

    model = RandomFeatureVotingClassifier(n_voters=n_voters, n_components=D, gamma=gamma,
                                          C=ctx.params["C"], random_state=seed)
    return model.fit(X_train, y_train, client=ctx.client)


def _rff(ctx, common, data, gamma, seed):
    X_train, y_train, X_test, y_test = data
    n_voters = ctx.params["n_voters"]
    for D in ctx.params["rff"]:
        model = _ensemble(ctx, gamma, n_voters, D, seed, X_train, y_train)
        votes = model.predict_voters(X_test)
        single = 100.0 * (votes == y_test[:, None]).mean(axis=0)
        voter_seconds = np.array([info["seconds"] for info in model.voter_info_])
        ensemble_acc = 100.0 * model.score(X_test, y_test)
        ctx.report(f"  D={D} seed={seed}: {n_voters} voters {ensemble_acc:.2f} %, one voter "
                   f"{single.mean():.2f} % (mean)")
        base = {**common, "part": "rff", "n_components": D, "seed": seed,
                "solver": model.voter_info_[0]["solver"]}
        yield {**base, "method": "rff-ensemble", "n_voters": n_voters,
               "n_features": n_voters * D, "accuracy": ensemble_acc,
               "train_seconds": model.fit_seconds_}
        yield {**base, "method": "rff-voter", "n_voters": 1, "n_features": D,
               "accuracy": float(single.mean()), "voter_accuracy_min": float(single.min()),
               "voter_accuracy_max": float(single.max()),
               "train_seconds": float(voter_seconds.mean())}


def _voters(ctx, common, data, gamma, seed):
    X_train, y_train, X_test, y_test = data
    for D in ctx.params["voter_rff"]:
        model = _ensemble(ctx, gamma, ctx.params["max_voters"], D, seed, X_train, y_train)
        curve = majority_curve(model.predict_voters(X_test), y_test, model.classes_)
        ctx.report(f"  D={D} seed={seed}: by voters {', '.join(f'{a:.1f}' for a in curve)}")
        for k, acc in enumerate(curve, start=1):
            yield {**common, "part": "voters", "method": "rff-ensemble", "n_components": D,
                   "n_voters": k, "n_features": k * D, "seed": seed, "accuracy": acc}


def _single(ctx, common, data, gamma, seed):
    from .. import RandomFourierFeatures
    from ..evaluation import linear_svm_accuracy

    X_train, y_train, X_test, y_test = data
    for D in ctx.params["voter_rff"]:
        for k in ctx.params["single_voters"]:
            total = k * D
            if total > ctx.params["single_max_features"]:
                continue
            rff = RandomFourierFeatures(gamma=gamma, n_components=total,
                                        random_state=seed).fit(X_train)
            Z_train, s_train = ctx.transform(rff, X_train)
            Z_test, s_test = ctx.transform(rff, X_test)
            fit = linear_svm_accuracy(Z_train, y_train, Z_test, y_test, C=ctx.params["C"],
                                      max_iter=ctx.params["max_iter"])
            ctx.report(f"  one RFF-SVM of {total} features seed={seed}: "
                       f"{100 * fit['accuracy']:.2f} %")
            yield {**common, "part": "single", "method": "rff-svm", "n_components": D,
                   "n_voters": k, "n_features": total, "seed": seed,
                   "accuracy": 100 * fit["accuracy"], "train_seconds": fit["train_seconds"],
                   "transform_seconds": s_train + s_test, "converged": fit["converged"]}


def plot(frame, folder):
    """``ensemble_<dataset>.png``: accuracy vs RFF, time vs RFF, accuracy vs voters (the
    panels whose parts ran)."""
    import matplotlib.pyplot as plt

    paths = []
    for name, part in frame.groupby("dataset", sort=False):
        base = part[part["part"] == "baselines"].groupby("method")
        base_acc = base["accuracy"].mean().to_dict()
        base_time = base["train_seconds"].mean().to_dict()
        rff = part[part["part"] == "rff"]
        voters = part[part["part"] == "voters"]
        kinds = (["accuracy", "time"] if len(rff) or base_acc else []) + \
            (["voters"] if len(voters) else [])
        if not kinds:
            continue
        fig, axes = plt.subplots(1, len(kinds), figsize=(4.7 * len(kinds), 4), squeeze=False)
        ax = dict(zip(kinds, axes[0], strict=True))
        if "accuracy" in ax:
            _plot_rff(ax["accuracy"], ax["time"], rff, base_acc, base_time, name)
        if "voters" in ax:
            _plot_voters(ax["voters"], voters, part[part["part"] == "single"], base_acc)
        for axis in axes[0]:
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
        fig.suptitle(f"{name} (pooled 14x14)")
        paths.append(save_figure(fig, folder, f"ensemble_{name}.png", dpi=90))
    return paths


def _plot_rff(acc_ax, time_ax, rff, base_acc, base_time, name):
    for method, color in (("rff-ensemble", "tab:red"), ("rff-voter", "tab:blue")):
        rows = rff[rff["method"] == method]
        if not len(rows):
            continue
        acc = rows.groupby("n_components")[["accuracy", "train_seconds"]].mean()
        label = "majority vote" if method == "rff-ensemble" else "one voter (mean)"
        acc_ax.plot(acc.index.astype(float), acc["accuracy"], "o-", color=color, label=label)
        time_ax.plot(acc.index.astype(float), acc["train_seconds"], "o-", color=color,
                     label=label)
    for method, style in (("rbf-svm", "--"), ("linear-svm-raw", ":")):
        if method in base_acc:
            acc_ax.axhline(base_acc[method], ls=style, color="k", label=method)
    if "rbf-svm" in base_time:
        time_ax.axhline(base_time["rbf-svm"], ls="--", color="k", label="rbf-svm")
    acc_ax.set(xscale="log", xlabel="RFF per voter", ylabel="test accuracy (%)",
               title="accuracy vs RFF")
    time_ax.set(xscale="log", yscale="log", xlabel="RFF per voter", ylabel="train seconds",
                title="training time")


def _plot_voters(ax, voters, single, base_acc):
    for i, (D, rows) in enumerate(voters.groupby("n_components")):
        curve = rows.groupby("n_voters")["accuracy"].mean()
        ax.plot(curve.index.astype(float), curve, color=f"C{i}", label=f"{int(D)} RFF vote")
        one = single[single["n_components"] == D]
        if len(one):
            pts = one.groupby("n_voters")["accuracy"].mean()
            ax.plot(pts.index.astype(float), pts, "s--", color=f"C{i}",
                    label=f"one SVM, {int(D)} x k RFF")
    if "rbf-svm" in base_acc:
        ax.axhline(base_acc["rbf-svm"], ls="--", color="k", label="rbf-svm")
    ax.set(xlabel="voters k", ylabel="test accuracy (%)", title="accuracy vs voters")


EXPERIMENT = Experiment(
    name="ensemble",
    title="Rost & Zast 2023, sections 2.4 and 5.4: majority vote of RFF + LinearSVC voters "
          "on pooled MNIST and Fashion-MNIST",
    profiles={
        "quick": {
            "parts": ["baselines", "rff", "voters"], "datasets": ["mnist"], "n_train": 3000,
            "n_test": 1000, "rff": [50, 200], "n_voters": 13, "voter_rff": [200],
            "max_voters": 13, "single_voters": [], "single_max_features": 5000, "C": 1.0,
            "max_iter": 5000, "repeats": 1,
        },
        "full": {
            "parts": ["baselines", "rff", "voters", "single"],
            "datasets": ["mnist", "fashion-mnist"], "n_train": 20000, "n_test": 10000,
            "rff": [50, 100, 200, 300, 500, 1000, 2000, 5000], "n_voters": 13,
            "voter_rff": [200, 300, 500], "max_voters": 100, "single_voters": [1, 5, 13, 25],
            "single_max_features": 5000, "C": 1.0, "max_iter": 5000, "repeats": 1,
        },
    },
    run=run,
    config_columns=("part", "dataset", "method", "n_components", "n_voters", "n_features"),
    metric_columns=("accuracy", "train_seconds", "transform_seconds"),
    plot=plot,
    notes=("MNIST and Fashion-MNIST IDX files, pixels x/255, 2x2 max-pooled to 14x14; "
           "20,000 training rows (quick: 3,000) and 10,000 test rows (quick: 1,000) drawn "
           "once (seed 2018); gamma = 1/(196 Var X) from the training rows; C = 1. Voters "
           "train on the Dask cluster unless --local (then in this process); "
           "train_seconds of rff-voter is the mean task time of one voter, of rff-ensemble "
           "the wall time of the whole fit. The thesis check of issue 14 (pooled MNIST, "
           "20k rows): one 500-RFF voter 94.6 %, 13 voters 96.0 %, 25 voters 96.2 %, exact "
           "RBF SVC 97.4 %."),
)
