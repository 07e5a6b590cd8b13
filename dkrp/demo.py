"""The demo (``dkrp demo``, the README's main job): the production path end to end.

The data go into a Zarr dataset store (:func:`dkrp.io.ingest`), are featurized on a
Dask cluster into a resumable feature store (:func:`dkrp.featurize_to_store`), are
read back, and train scikit-learn's ``LinearSVC``; the same rows train a linear SVM on
the raw inputs and exact-kernel SVMs for reference (:mod:`dkrp.evaluation`).

Nothing here prints: results come back as rows (dicts) for the caller to show.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import uuid
from pathlib import Path

from .errors import InvalidInputError

# numpy, scikit-learn and the protocols are imported where the demo runs: `dkrp --help`
# imports this module for DEMO_DATASETS and must stay light (tests/test_user_path.py)

__all__ = ["DEMO_DATASETS", "DEMO_MAX_ITER", "load_demo_dataset", "run_demo"]

DEMO_DATASETS = ("digits", "mnist", "fashion-mnist", "covtype", "w8a")
#: liblinear's iteration cap in the demo: on covtype, LinearSVC on unscaled KRP features ran
#: its default 10000 iterations (minutes, silently); standardised, covtype needs ~700
#: (80 s on 2 busy cores), digits 10: rows that stop at the cap are marked.
DEMO_MAX_ITER = 200


def load_demo_dataset(name="digits", *, max_train=None, max_test=None, seed=0):
    """Train/test arrays for the demo, from local files (never the network).

    Parameters
    ----------
    name : {"digits", "mnist", "fashion-mnist", "covtype", "w8a"}
        ``digits`` ships with scikit-learn; the others come from
        :func:`dkrp.datasets.data_dir` (``DKRP_DATA_DIR``).
    max_train, max_test : int, optional
        Keep a seeded uniform sample of this many rows, in their order (not stratified), to
        keep the exact-kernel SVM fast.
    seed : int, default=0

    Returns
    -------
    X_train, y_train, X_test, y_test : arrays (X dense float64, or CSR for w8a)
    note : str
        What was used (sizes, scaling, subsampling).
    """
    import numpy as np
    from sklearn.model_selection import train_test_split

    from . import datasets

    note = ""
    if name == "digits":
        X, y = datasets.load_digits_scaled()
        split = train_test_split(X, y, test_size=0.25, stratify=y, random_state=seed)
        X_train, X_test, y_train, y_test = split
        note = "scikit-learn digits, pixels / 16, 75/25 stratified split"
    elif name in ("mnist", "fashion-mnist"):
        loader = datasets.load_mnist if name == "mnist" else datasets.load_fashion_mnist
        X_train, y_train = loader("train", scale="[0,1]")
        X_test, y_test = loader("test", scale="[0,1]")
        max_train = 5000 if max_train is None else max_train
        max_test = 2000 if max_test is None else max_test
        note = f"{name} IDX files, pixels / 255"
    elif name == "covtype":
        X, y = datasets.load_covtype()
        # standardise: the raw columns span 0..7000 (distances) and 0/1 (indicators)
        X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
        split = train_test_split(X, y, test_size=0.25, stratify=y, random_state=seed)
        X_train, X_test, y_train, y_test = split
        max_train = 6000 if max_train is None else max_train
        note = f"covtype ({X.shape[0]} rows), standardised columns, 75/25 split"
    elif name == "w8a":
        X, y = datasets.load_w8a()
        split = train_test_split(X, y, test_size=0.25, stratify=y, random_state=seed)
        X_train, X_test, y_train, y_test = split
        max_train = 8000 if max_train is None else max_train
        max_test = 4000 if max_test is None else max_test
        note = "w8a (training file only; split 75/25), sparse binary features"
    else:
        raise InvalidInputError(
            f"Unknown demo dataset {name!r}; choose one of {', '.join(DEMO_DATASETS)}."
        )
    X_train, y_train, n_train = _subsample(X_train, y_train, max_train, seed)
    X_test, y_test, n_test = _subsample(X_test, y_test, max_test, seed + 1)
    if n_train or n_test:
        note += f"; subsampled to {X_train.shape[0]} train / {X_test.shape[0]} test rows for speed"
    return X_train, y_train, X_test, y_test, note


def _subsample(X, y, n, seed):
    if n is None or X.shape[0] <= n:
        return X, y, False
    import numpy as np

    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(X.shape[0], size=n, replace=False))
    return X[idx], y[idx], True


def _demo_projectors(name, n_features, X_train, seed):
    """KRP and RFF settings for the demo (chosen on digits: see the docstring of run_demo)."""
    from .features import PolynomialRandomProjection, RandomFourierFeatures
    from .kernels import scale_gamma

    gamma = scale_gamma(X_train)  # scikit-learn's gamma="scale"
    krp = PolynomialRandomProjection(
        degree=2, n_components=1000, n_hyperplanes=500, n_terms=5, random_state=seed
    ).fit_n_features(n_features)
    rff = RandomFourierFeatures(
        kernel="gaussian", gamma=gamma, n_components=1000, random_state=seed
    ).fit_n_features(n_features)
    # C for LinearSVC on standardised features (as train_on_features)
    return [("KRP (poly g=2, p=500, t=5)", krp, 0.01), ("RFF (gaussian, gamma=scale)", rff, 0.01)]


def run_demo(
    dataset="digits",
    *,
    client=None,
    workdir=None,
    seed=0,
    max_train=None,
    max_test=None,
    exact=True,
    progress=False,
    report=None,
    max_iter=DEMO_MAX_ITER,
):
    """The README's main job: random features through the cluster and Zarr, then linear SVMs.

    Steps: load the data (:func:`load_demo_dataset`); write train and test rows as
    ``.npy`` and ingest them into Zarr dataset stores; featurize both with KRP
    (degree 2, k=1000, p=500, t=5) and RFF (Gaussian, k=1000, gamma="scale") into
    feature stores on the cluster; read the features back; train ``LinearSVC``.
    Reference rows: ``LinearSVC`` on the raw inputs and exact ``SVC`` with the
    homogeneous polynomial kernel (degree 2, gamma=1, coef0=0) and the RBF kernel.

    Parameters
    ----------
    dataset : str, default="digits"
        See :func:`load_demo_dataset`.
    client : distributed.Client or callable, optional
        Default: the current client, else dask's local scheduler. A zero-argument
        callable is called when the first featurize needs the cluster (after the data
        have loaded), as :func:`dkrp.featurize_to_store` does; it must return the same
        client each time.
    workdir : str or os.PathLike, optional
        Where the stores go; default a temporary directory removed afterwards.
    seed : int, default=0
    max_train, max_test : int, optional
        Subsampling (defaults per dataset keep the run short).
    exact : bool, default=True
        Include the exact-kernel SVMs.
    progress : bool, default=False
        Progress bars of the featurizing.
    report : callable, optional
        ``report(line)`` is called as each step starts (loading, each model's training),
        so a long step is never silent.
    max_iter : int, default=DEMO_MAX_ITER
        liblinear's iteration cap of every ``LinearSVC`` (the row's ``converged`` says
        whether it stopped there); the features are standardised before it.

    Returns
    -------
    list of dict
        One row per model: ``model``, ``n_features``, ``accuracy``, ``f1_macro``,
        ``featurize_seconds``, ``train_seconds``, ``converged``, ``note``, and for feature maps
        ``store`` (the feature store path, or None once a temporary workdir is gone).
    """
    import numpy as np

    from .evaluation import kernel_svm_accuracy, linear_svm_accuracy, timer
    from .feature_store import open_features
    from .io import ingest
    from .jobs import featurize_to_store

    def step(text):
        if report is not None:
            report(text)

    step(f"loading {dataset}")
    X_train, y_train, X_test, y_test, note = load_demo_dataset(
        dataset, max_train=max_train, max_test=max_test, seed=seed
    )
    n_features = X_train.shape[1]
    shape = f"{X_train.shape[0]} train / {X_test.shape[0]} test rows"
    rows = []
    step(f"LinearSVC on the raw inputs ({shape} x {n_features})")
    raw = linear_svm_accuracy(X_train, y_train, X_test, y_test, C=1.0, max_iter=max_iter)
    rows.append(_row("LinearSVC on raw inputs", n_features, raw, 0.0, note))

    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="dkrp-demo-"))
            keep = False
        else:
            keep = True
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        stores = {}
        step(f"ingesting train and test rows into Zarr dataset stores in {workdir}")
        for part, X in (("train", X_train), ("test", X_test)):
            dense = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
            # the rows go through a hidden .npy of the demo's own, removed once ingested:
            # a user's <dataset>-<part>.npy in --workdir is never written over
            npy = workdir / f".{dataset}-{part}.demo-{uuid.uuid4().hex[:12]}.npy"
            stores[part] = workdir / f"{dataset}-{part}.zarr"
            try:
                np.save(npy, np.ascontiguousarray(dense, dtype=np.float64))
                ingest(npy, stores[part], overwrite=True,
                       chunk_rows=_chunk_rows(dense.shape[0]))
            finally:
                npy.unlink(missing_ok=True)
        for label, projector, C in _demo_projectors(dataset, n_features, X_train, seed):
            step(f"featurizing with {label} on the cluster")
            with timer() as t:
                Z = {}
                for part in ("train", "test"):
                    out = workdir / f"{dataset}-{part}-{type(projector).__name__}.zarr"
                    featurize_to_store(
                        stores[part],
                        out,
                        projector,
                        client=client,
                        overwrite=True,
                        progress=progress,
                        check=part == "train",  # once per projector
                    )
                    Z[part] = open_features(out).Z.compute()
            step(f"LinearSVC on {label} ({projector.n_components} standardised features)")
            result = linear_svm_accuracy(Z["train"], y_train, Z["test"], y_test, C=C,
                                         max_iter=max_iter, standardize=True)
            row = _row(f"LinearSVC on {label}", projector.n_components, result, t["seconds"],
                       note)
            row["store"] = str(out.parent) if keep else None
            rows.append(row)
    if exact:
        step("exact-kernel SVC, <x,y>^2")
        poly = kernel_svm_accuracy(
            X_train, y_train, X_test, y_test, kernel="poly", degree=2, gamma=1.0, coef0=0.0
        )
        rows.append(_row("exact SVC, <x,y>^2", None, poly, 0.0, note))
        step("exact-kernel SVC, RBF")
        rbf = kernel_svm_accuracy(X_train, y_train, X_test, y_test, kernel="rbf", gamma="scale")
        rows.append(_row("exact SVC, RBF (gamma=scale)", None, rbf, 0.0, note))
    return rows


def _chunk_rows(n):
    # a few row blocks per worker even for the small demo sets, so the cluster has work to share
    return max(64, math.ceil(n / 8))


def _row(model, n_features, result, featurize_seconds, note):
    return {
        "model": model,
        "n_features": n_features,
        "accuracy": result["accuracy"],
        "f1_macro": result["f1_macro"],
        "featurize_seconds": featurize_seconds,
        "train_seconds": result["train_seconds"],
        "converged": result.get("converged", True),
        "note": note,
    }
