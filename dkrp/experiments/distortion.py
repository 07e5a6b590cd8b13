"""``distortion``: the KRP paper's Tables 2, 3 (MNIST), 8, 9 (w8a) and 5, 6 (Webspam; a9a here).

For each dataset, degree ``g`` and output dimension ``k``, every method maps the
same evaluation rows and :func:`dkrp.metrics.distance_distortion` (eq. 18) measures
how far the pairwise distances of ``z(x)`` are from those of ``phi(x)``, the
feature space of ``<x, y>^g``. ``train_seconds`` is the fit (landmark sampling and
the KG-RP/Nystrom algebra; the hyperplane draw for the data-independent maps),
``transform_seconds`` the mapping of the evaluation rows, as in the paper.
"""

from __future__ import annotations

from ._data import load_split, p_grid, subsample
from ._maps import DATA_DEPENDENT, DEGREE_2_ONLY, KRP_METHODS, NO_POOL, make_map
from ._outputs import method_color, save_figure
from ._protocol import Experiment, timer

__all__ = ["EXPERIMENT"]


def _configurations(params, n_paper, degree):
    """(method, p, t) triples for one dataset and degree."""
    ps = p_grid(n_paper, params["p_factors"])
    t = params["n_terms"]
    for method in params["methods"]:
        if degree != 2 and method in DEGREE_2_ONLY:
            continue
        if method == "prp":  # P-RP averages m = 30 projection products (the paper, §3.4)
            yield method, None, t
            continue
        if method in NO_POOL:
            yield method, None, None
            continue
        for p in ps:
            yield method, p, t
        if method in KRP_METHODS:  # the paper's large-p rows (Table 2: Gaussian only)
            for p in params["large_p"]:
                yield method, p, t


def run(ctx):
    params = ctx.params
    for dataset in params["datasets"]:
        split = load_split(dataset)
        ctx.report(f"distortion on {dataset}: {split.note}")
        # the evaluation rows: a fixed random draw (seed 2018), as the paper's "500 samples"
        X_eval, _ = subsample(split.X_test, split.y_test, params["n_eval"], seed=2018)
        X_fit, _ = subsample(split.X_train, split.y_train, params.get("n_train"), seed=2019)
        for degree in params["degrees"]:
            for k in params["n_components"]:
                for method, p, t in _configurations(params, split.n_paper, degree):
                    seeds = list(ctx.seeds())
                    if method.startswith("explicit-"):  # minutes per draw: fewer repeats
                        seeds = seeds[:params["explicit_repeats"]]
                    for seed in seeds:
                        yield _one(ctx, dataset, X_fit, X_eval, method, degree, k, p, t, seed)


def _one(ctx, dataset, X_fit, X_eval, method, degree, k, p, t, seed):
    from ..metrics import distance_distortion

    projector = make_map(method, degree=degree, k=k, p=p, t=t, seed=seed)
    with timer() as fit:
        projector.fit(X_fit if method in DATA_DEPENDENT else X_eval)
    Z, transform_seconds = ctx.transform(projector, X_eval)
    value = float(distance_distortion(X_eval, Z, degree=degree))
    ctx.report(f"  {dataset} g={degree} k={k} {method} p={p} t={t} seed={seed}: {value:.4f}")
    return {
        "dataset": dataset, "degree": degree, "k": k, "method": method,
        "p": "" if p is None else p, "t": "" if t is None else t, "seed": seed,
        "n_eval": X_eval.shape[0],
        "distortion": value,
        "train_seconds": fit["seconds"],
        "transform_seconds": transform_seconds,
        "seconds": fit["seconds"] + transform_seconds,  # the tables' one "time" column
    }


def plot(frame, folder):
    """One figure per dataset and degree: distortion against p, a panel per k."""
    import matplotlib.pyplot as plt

    paths = []
    for (dataset, degree), part in frame.groupby(["dataset", "degree"], sort=False):
        ks = sorted(part["k"].unique())
        fig, axes = plt.subplots(1, len(ks), figsize=(4.2 * len(ks), 3.6), squeeze=False,
                                 sharey=True)
        for ax, k in zip(axes[0], ks, strict=True):
            at_k = part[part["k"] == k]
            for method, rows in at_k.groupby("method", sort=False):
                p = rows["p"].astype(str)
                if (p == "").all():  # no p: a horizontal reference line
                    mean = rows["distortion"].mean()
                    ax.axhline(mean, ls="--", lw=1, label=f"{method} ({mean:.3f})",
                               color=method_color(method))
                    continue
                stats = (rows.assign(p=rows["p"].astype(float))
                         .groupby("p")["distortion"].agg(["mean", "std"]).sort_index())
                ax.errorbar(stats.index, stats["mean"], yerr=stats["std"].fillna(0),
                            marker="o", ms=3, capsize=2, label=method, color=method_color(method))
            ax.set_xscale("log")
            ax.set_xlabel("p (hyperplanes / landmarks)")
            ax.set_title(f"k = {k}")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("average distance distortion (eq. 18)")
        axes[0][-1].legend(fontsize=7)
        fig.suptitle(f"{dataset}, <x, y>^{degree}")
        paths.append(save_figure(fig, folder, f"distortion_{dataset}_g{degree}.png", dpi=110))
    return paths


EXPERIMENT = Experiment(
    name="distortion",
    title="KRP paper Tables 2, 3, 8, 9 (and 5, 6 with a9a for Webspam): distance distortion",
    profiles={
        "quick": {
            "datasets": ["mnist"], "degrees": [2], "n_components": [200],
            "methods": ["krp-gaussian", "krp-sparse-s3", "kg-rp", "nystroem"],
            "p_factors": [1], "large_p": [], "n_terms": 30, "n_eval": 100, "n_train": 5000,
            "repeats": 1, "explicit_repeats": 1,
        },
        "full": {
            "datasets": ["mnist", "mnist-01", "w8a", "a9a"], "degrees": [2, 3],
            "n_components": [200, 500, 1000],
            "methods": ["krp-gaussian", "krp-sparse-s1", "krp-sparse-s3", "krp-structured",
                        "kg-rp", "nystroem", "prp", "explicit-gaussian", "explicit-sparse-s1",
                        "explicit-sparse-s3"],
            "p_factors": [0.5, 1, 2, 4], "large_p": [3000, 8000, 16000], "n_terms": 30,
            "n_eval": 500, "n_train": None, "repeats": 5, "explicit_repeats": 2,
        },
    },
    run=run,
    config_columns=("dataset", "degree", "k", "method", "p", "t"),
    metric_columns=("distortion", "seconds", "train_seconds", "transform_seconds"),
    plot=plot,
    notes=("Evaluation rows: 500 (quick: 100) drawn once (seed 2018) from the test part; "
           "p = {1/2, 1, 2, 4} x floor(sqrt(n)) with n the paper's training-set size. "
           "mnist: pixels x/127.5 - 1 (the paper's scaling); mnist-01: x/255. w8a: only the "
           "training file is here, evaluation rows come from a held-out 20 %. a9a stands in "
           "for Webspam (not available here). phi(x)+RP (explicit-*) runs 2 seeds at full: "
           "about 2 minutes per draw at k = 1000 here. Times are this machine's, not the "
           "paper's."),
)
