"""``rff``: Rost & Zast (2023), random Fourier features against exact kernels, Nyström and PCA.

Four parts, every row labelled by ``part``:

``krr`` (thesis Section 5.2, Figure 5.2)
    Kernel ridge regression with the RBF kernel ``exp(-|x - y|^2 / (2 sigma^2))``,
    ``sigma = 0.5``, ``lambda = 1``: ridge on ``D`` random Fourier features
    (``rff-krr``, :func:`dkrp.evaluation.ridge_mse`) against scikit-learn's exact
    ``KernelRidge`` (``exact-krr``, :func:`dkrp.evaluation.kernel_ridge_mse`); test MSE and
    seconds against ``D``. Avocado and Wine-Quality.
``features`` (Sections 5.3, 5.3.1, Figures 5.3-5.4)
    A linear SVM on ``D`` RFF (``rff-svm``) or Nyström (``nystroem-svm``) features of the
    RBF kernel, ``sigma = 2``; reference lines: the exact RBF-kernel SVM (``rbf-svm``) and a
    linear SVM on the pixels (``linear-svm-raw``). Pooled MNIST and Fashion-MNIST.
``pca`` (Section 5.3.2, Figure 5.5)
    PCA to ``q`` dimensions, then the RBF-kernel SVM (``pca-rbf-svm``).
``noise`` (Section 5.3.3, Figure 5.7)
    Each training pixel replaced, with probability ``noise``, by a uniform value in
    [0, 1]; labels and test rows untouched; ``rff-svm`` and ``pca-rbf-svm`` retrained.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._data import load_split, subsample
from ._outputs import save_figure
from ._protocol import Experiment, timer

__all__ = ["EXPERIMENT", "add_pixel_noise"]


def gamma_of(sigma):
    """``gamma = 1 / (2 sigma^2)``: the thesis's kernel (eq. 3.8) in scikit-learn's form."""
    return 1.0 / (2.0 * float(sigma) ** 2)


def add_pixel_noise(X, probability, seed):
    """Each entry replaced, with ``probability``, by a uniform value in [0, 1] (thesis 5.3.3)."""
    rng = np.random.default_rng([int(seed), 53])  # stream 53: the noise, apart from the maps'
    X = np.array(X, dtype=np.float64, copy=True)
    hit = rng.random(X.shape) < probability
    X[hit] = rng.random(int(hit.sum()))
    return X


def run(ctx):
    yield from _regression(ctx)
    yield from _classification(ctx)


def _row(dataset, part, method, seed, *, D="", q="", noise="", **measured):
    return {"dataset": dataset, "part": part, "method": method, "D": D, "q": q,
            "noise": noise, "seed": seed, **measured}


def _regression(ctx):
    from ..evaluation import kernel_ridge_mse, ridge_mse
    from ..features import RandomFourierFeatures

    params = ctx.params
    gamma, alpha = gamma_of(params["krr_sigma"]), params["alpha"]
    for dataset in params["krr_datasets"]:
        split = load_split(dataset)
        ctx.report(f"rff krr on {dataset}: {split.note}")
        X_train, y_train = subsample(split.X_train, split.y_train, params["krr_n_train"], 2019)
        X_test, y_test = split.X_test, split.y_test
        # no intercept on either side: centre the targets by the training mean
        offset = float(np.mean(y_train))
        y_train, y_test = y_train - offset, y_test - offset
        sizes = {"n_train": X_train.shape[0], "n_test": X_test.shape[0], "gamma": gamma,
                 "alpha": alpha}
        if params["exact"]:
            exact = kernel_ridge_mse(X_train, y_train, X_test, y_test, gamma=gamma, alpha=alpha)
            ctx.report(f"  {dataset} exact-krr: MSE {exact['mse']:.4f} "
                       f"({exact['train_seconds']:.1f} s)")
            yield _row(dataset, "krr", "exact-krr", ctx.seed, **sizes, mse=exact["mse"],
                       train_seconds=exact["train_seconds"], transform_seconds=0.0,
                       seconds=exact["train_seconds"])
        for D in params["krr_D"]:
            for seed in ctx.seeds():
                rff = RandomFourierFeatures(gamma=gamma, n_components=D, random_state=seed)
                with timer() as fit:
                    rff.fit(X_train)
                Z_train, s_train = ctx.transform(rff, X_train)
                Z_test, s_test = ctx.transform(rff, X_test)
                result = ridge_mse(Z_train, y_train, Z_test, y_test, alpha=alpha)
                transform = fit["seconds"] + s_train + s_test
                ctx.report(f"  {dataset} rff-krr D={D} seed={seed}: MSE {result['mse']:.4f}")
                yield _row(dataset, "krr", "rff-krr", seed, D=D, **sizes, mse=result["mse"],
                           train_seconds=result["train_seconds"], transform_seconds=transform,
                           seconds=transform + result["train_seconds"])


def _classification(ctx):
    from ..evaluation import kernel_svm_accuracy, linear_svm_accuracy

    params = ctx.params
    gamma = gamma_of(params["svm_sigma"])
    for dataset in params["svm_datasets"]:
        split = load_split(dataset)
        X_train, y_train = subsample(split.X_train, split.y_train, params["n_train"], 2019)
        X_test, y_test = subsample(split.X_test, split.y_test, params["n_test"], 2020)
        ctx.report(f"rff svm on {dataset}: {split.note}; {X_train.shape[0]:,} train / "
                   f"{X_test.shape[0]:,} test rows")
        common = {"n_train": X_train.shape[0], "n_test": X_test.shape[0], "gamma": gamma,
                  "C": params["C"]}

        def linear(Z_train, Z_test, y_train=y_train, y_test=y_test):
            return linear_svm_accuracy(Z_train, y_train, Z_test, y_test, C=params["C"],
                                       tol=params["tol"])

        raw = linear(X_train, X_test)
        yield _row(dataset, "features", "linear-svm-raw", ctx.seed, noise=0.0, **common,
                   **_scores(raw, 0.0))
        if params["exact"]:
            exact = kernel_svm_accuracy(X_train, y_train, X_test, y_test, kernel="rbf",
                                        gamma=gamma, C=params["C"])
            ctx.report(f"  {dataset} rbf-svm: {100 * exact['accuracy']:.2f} % "
                       f"({exact['train_seconds']:.1f} s)")
            yield _row(dataset, "features", "rbf-svm", ctx.seed, noise=0.0, **common,
                       **_scores(exact, 0.0))
        for D in params["D"]:
            for seed in ctx.seeds():
                for method in ("rff-svm", "nystroem-svm"):
                    Z_train, Z_test, seconds = _features(ctx, method, gamma, D, seed,
                                                         X_train, X_test)
                    result = linear(Z_train, Z_test)
                    ctx.report(f"  {dataset} {method} D={D} seed={seed}: "
                               f"{100 * result['accuracy']:.2f} %")
                    yield _row(dataset, "features", method, seed, D=D, noise=0.0, **common,
                               **_scores(result, seconds))
        for q in params["q"]:
            result = _pca_rbf(X_train, y_train, X_test, y_test, q, gamma, params["C"])
            ctx.report(f"  {dataset} pca-rbf-svm q={q}: {100 * result['accuracy']:.2f} %")
            yield _row(dataset, "pca", "pca-rbf-svm", ctx.seed, q=q, noise=0.0, **common,
                       **_scores(result, result.pop("transform_seconds")))
        for noise in params["noise"]:
            for seed in ctx.seeds():
                X_noisy = add_pixel_noise(X_train, noise, seed)
                for D in params["noise_D"]:
                    Z_train, Z_test, seconds = _features(ctx, "rff-svm", gamma, D, seed,
                                                         X_noisy, X_test)
                    result = linear(Z_train, Z_test)
                    ctx.report(f"  {dataset} noise={noise} rff-svm D={D} seed={seed}: "
                               f"{100 * result['accuracy']:.2f} %")
                    yield _row(dataset, "noise", "rff-svm", seed, D=D, noise=noise, **common,
                               **_scores(result, seconds))
                for q in params["noise_q"]:
                    result = _pca_rbf(X_noisy, y_train, X_test, y_test, q, gamma, params["C"])
                    ctx.report(f"  {dataset} noise={noise} pca-rbf-svm q={q} seed={seed}: "
                               f"{100 * result['accuracy']:.2f} %")
                    yield _row(dataset, "noise", "pca-rbf-svm", seed, q=q, noise=noise,
                               **common, **_scores(result, result.pop("transform_seconds")))


def _features(ctx, method, gamma, D, seed, X_train, X_test):
    """RFF or Nyström features of the training and test rows, and the seconds they took."""
    from ..baselines import Nystroem
    from ..features import RandomFourierFeatures

    if method == "rff-svm":
        projector = RandomFourierFeatures(gamma=gamma, n_components=D, random_state=seed)
    else:
        projector = Nystroem(kernel="rbf", gamma=gamma, n_components=D, random_state=seed)
    with timer() as fit:
        projector.fit(X_train)  # Nyström: landmarks and K_mm^{-1/2} from the training rows
    Z_train, s_train = ctx.transform(projector, X_train)
    Z_test, s_test = ctx.transform(projector, X_test)
    return Z_train, Z_test, fit["seconds"] + s_train + s_test


def _pca_rbf(X_train, y_train, X_test, y_test, q, gamma, C):
    from ..baselines import PCAProjector
    from ..evaluation import kernel_svm_accuracy

    with timer() as t:
        pca = PCAProjector(n_components=q).fit(X_train)
        P_train, P_test = pca.transform(X_train), pca.transform(X_test)
    result = kernel_svm_accuracy(P_train, y_train, P_test, y_test, kernel="rbf", gamma=gamma,
                                 C=C)
    result["transform_seconds"] = t["seconds"]
    return result


def _scores(result, transform_seconds):
    return {"accuracy": 100 * result["accuracy"], "train_seconds": result["train_seconds"],
            "transform_seconds": transform_seconds,
            "seconds": transform_seconds + result["train_seconds"]}


# ---------------------------------------------------------------------------- plots

def _line(ax, rows, x, y, **style):
    stats = rows.assign(**{x: rows[x].astype(float)}).groupby(x)[y].agg(["mean", "std"])
    ax.errorbar(stats.index, stats["mean"], yerr=stats["std"].fillna(0), marker="o", ms=3,
                capsize=2, **style)


def _reference(ax, rows, y, label, color):
    if len(rows):
        value = rows[y].astype(float).mean()
        ax.axhline(value, ls="--", lw=1, color=color, label=f"{label} ({value:.3g})")


def plot(frame, folder):
    import matplotlib.pyplot as plt

    paths = []
    folder = Path(folder)
    krr = frame[frame["part"] == "krr"]
    for dataset, part in krr.groupby("dataset", sort=False):
        fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8))
        rff = part[part["method"] == "rff-krr"]
        exact = part[part["method"] == "exact-krr"]
        _line(left, rff, "D", "mse", color="C3", label="RFF + ridge")
        _reference(left, exact, "mse", "exact RBF KRR", "k")
        _line(right, rff, "D", "seconds", color="C3", label="RFF + ridge")
        _reference(right, exact, "seconds", "exact RBF KRR", "k")
        for ax, label in ((left, "test MSE"), (right, "seconds (features + fit)")):
            ax.set_xscale("log")
            ax.set_xlabel("D (random Fourier features)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        right.set_yscale("log")
        fig.suptitle(f"{dataset}: kernel ridge regression, sigma = 0.5, lambda = 1")
        paths.append(save_figure(fig, folder, f"rff_mse_vs_features_{dataset}.png"))
    svm = frame[frame["part"].isin(["features", "pca"])]
    for dataset, part in svm.groupby("dataset", sort=False):
        fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8))
        for method, color in (("rff-svm", "C3"), ("nystroem-svm", "C0")):
            rows = part[part["method"] == method]
            _line(left, rows, "D", "accuracy", color=color, label=method)
            _line(right, rows, "D", "seconds", color=color, label=method)
        pca = part[part["method"] == "pca-rbf-svm"]
        _line(left, pca, "q", "accuracy", color="C2", label="pca-rbf-svm (x = q)")
        _line(right, pca, "q", "seconds", color="C2", label="pca-rbf-svm (x = q)")
        for method, color in (("rbf-svm", "k"), ("linear-svm-raw", "C7")):
            rows = part[part["method"] == method]
            _reference(left, rows, "accuracy", method, color)
            _reference(right, rows, "seconds", method, color)
        for ax, label in ((left, "test accuracy (%)"), (right, "seconds (features + fit)")):
            ax.set_xscale("log")
            ax.set_xlabel("dimension (D features, or q PCA components)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        right.set_yscale("log")
        left.legend(fontsize=7)
        fig.suptitle(f"{dataset}: linear SVM on RBF features (sigma = 2) vs exact SVMs")
        paths.append(save_figure(fig, folder, f"rff_accuracy_vs_dimension_{dataset}.png"))
    import pandas as pd

    noisy = frame[frame["part"] == "noise"]
    for dataset, part in noisy.groupby("dataset", sort=False):
        clean = frame[(frame["dataset"] == dataset) & (frame["part"].isin(["features", "pca"]))]
        both = pd.concat([clean, part])
        fig, ax = plt.subplots(figsize=(5.6, 3.9))
        curves = 0
        for method, key, style in (("rff-svm", "D", "-"), ("pca-rbf-svm", "q", "--")):
            rows = both[both["method"] == method]
            size = pd.to_numeric(rows[key], errors="coerce")
            for value in sorted(pd.to_numeric(part.loc[part["method"] == method, key]).unique()):
                _line(ax, rows[size == value], "noise", "accuracy", ls=style,
                      color=f"C{curves}", label=f"{method} {key}={value:g}")
                curves += 1
        ax.set_xlabel("probability a training pixel is replaced by uniform noise")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(f"{dataset}: label-free pixel noise on the training images")
        paths.append(save_figure(fig, folder, f"rff_accuracy_vs_noise_{dataset}.png"))
    return paths



EXPERIMENT = Experiment(
    name="rff",
    title="Rost & Zast 2023: RFF kernel ridge regression; RFF vs Nystrom vs PCA SVMs; noise",
    profiles={
        "quick": {
            "krr_datasets": ["wine-quality"], "krr_D": [20, 200, 2000], "krr_n_train": None,
            "krr_sigma": 0.5, "alpha": 1.0,
            "svm_datasets": ["mnist-pooled"], "D": [100, 400], "q": [25],
            "noise": [0.5], "noise_D": [400], "noise_q": [25],
            "svm_sigma": 2.0, "C": 1.0, "tol": 1e-3, "n_train": 600, "n_test": 1000,
            "exact": True, "repeats": 1,
        },
        "full": {
            "krr_datasets": ["avocado", "wine-quality"],
            "krr_D": [10, 30, 100, 300, 1000, 3000], "krr_n_train": None,
            "krr_sigma": 0.5, "alpha": 1.0,
            "svm_datasets": ["mnist-pooled", "fashion-mnist-pooled"],
            "D": [100, 300, 1000, 3000], "q": [10, 25, 50, 100],
            "noise": [0.1, 0.2, 0.5], "noise_D": [300, 1000, 3000], "noise_q": [25, 50],
            "svm_sigma": 2.0, "C": 1.0, "tol": 1e-3, "n_train": 10000, "n_test": None,
            "exact": True, "repeats": 3,
        },
    },
    run=run,
    config_columns=("dataset", "part", "method", "noise", "D", "q"),
    metric_columns=("mse", "accuracy", "train_seconds", "transform_seconds", "seconds"),
    plot=plot,
    notes=(
        "Rost & Zast state sigma = 0.5 (regression) and sigma = 2 (classification) for "
        "k = exp(-|x-y|^2 / (2 sigma^2)) (their eq. 3.8), i.e. gamma = 2 and 0.125, and "
        "lambda = 1 (used as scikit-learn's alpha = 1 on both sides, no intercept, targets "
        "centred by the training mean). Not stated there, chosen here: regression features "
        "min-max scaled to [0, 1] on a fixed 80/20 split (Avocado: the 8 volume columns, "
        "target AveragePrice; Wine: 11 columns, target quality); images pixels / 255 then "
        "2x2 max-pooled (196 features), as they describe; LinearSVC C = 1, tol 1e-3; the "
        "RFF grid. The exact RBF SVM (and so every SVM here, for one protocol) trains on a "
        "fixed subsample of 10,000 of the 60,000 training images (quick: 600), scored on "
        "the full 10,000 test images (quick: 1,000): libsvm on 60,000 rows takes hours on "
        "2 cores. rbf-svm, linear-svm-raw, exact-krr and clean pca-rbf-svm are "
        "deterministic and run once (their seed column is the first seed). Noise replaces "
        "a training pixel of the pooled [0, 1] image by U[0, 1] with the stated "
        "probability; test images stay clean. Times are this machine's (2 shared cores)."
    ),
)
