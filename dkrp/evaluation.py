"""Evaluation protocols: linear models on random features against exact kernel machines.

This module owns the demo (``dkrp demo``, the README's main job) and the small
protocols it is made of. The demo runs the production path end to end: the data
go into a Zarr dataset store (:func:`dkrp.io.ingest`), are featurized on a Dask
cluster into a resumable feature store (:func:`dkrp.featurize_to_store`),
are read back, and train scikit-learn's ``LinearSVC``; the same rows train a linear
SVM on the raw inputs and exact-kernel SVMs for reference.

Nothing here prints: results come back as rows (dicts) for the caller to show.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from ._validation import check_choice
from .errors import InvalidInputError

logger = logging.getLogger(__name__)

__all__ = [
    "DEMO_DATASETS",
    "cross_validated_linear_svm",
    "kernel_ridge_mse",
    "kernel_svm_accuracy",
    "linear_svm_accuracy",
    "load_demo_dataset",
    "ridge_mse",
    "select_svm_C",
    "stratified_subsample",
    "run_demo",
    "train_on_features",
]

DEMO_DATASETS = ("digits", "mnist", "fashion-mnist", "covtype", "w8a")
#: liblinear's iteration cap in the demo: on covtype, LinearSVC on unscaled KRP features ran
#: its default 10000 iterations (minutes, silently); standardised, covtype needs ~700
#: (80 s on 2 busy cores), digits 10: rows that stop at the cap are marked.
DEMO_MAX_ITER = 200


@contextlib.contextmanager
def timer():
    box = {}
    t0 = time.perf_counter()
    try:
        yield box
    finally:
        box["seconds"] = time.perf_counter() - t0


def _scores(y_true, y_pred, positive_label=None) -> dict:
    from sklearn.metrics import accuracy_score, f1_score

    out = {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "f1_macro": float(f1_score(y_true, y_pred, average="macro")),
    }
    if positive_label is not None:  # imbalanced binary data: the positive class's F1
        out["f1"] = float(f1_score(y_true, y_pred, pos_label=positive_label))
    return out


def linear_svm_accuracy(Z_train, y_train, Z_test, y_test, *, C=1.0, max_iter=10000,
                        standardize=False, tol=1e-4, dual="auto", positive_label=None,
                        solver="liblinear", random_state=0):
    """Train ``LinearSVC`` on ``Z_train`` and score it on ``Z_test``.

    Parameters
    ----------
    Z_train, Z_test : array-like or sparse matrix
        Features (random features or raw inputs).
    y_train, y_test : array-like
    C : float, default=1.0
    max_iter : int, default=10000
    standardize : bool, default=False
        Scale the columns (``StandardScaler`` fitted on ``Z_train``) first: products of
        projections are heavy-tailed, and liblinear's coordinate descent on unscaled random
        features can run for minutes without converging.
    tol : float, default=1e-4
        liblinear's stopping tolerance (1e-3 reaches the same test accuracy on pooled MNIST
        RFF features in a third of the time).
    dual : bool or "auto", default="auto"
        ``LinearSVC``'s switch: ``False`` solves the primal (liblinear's trust-region
        Newton), the faster one when there are many more rows than features (MNIST:
        60,000 rows, 1,500 features).
    positive_label : optional
        For binary problems: also report ``f1``, the F1 score of this class.
    solver : {"liblinear", "primal-newton"}, default="liblinear"
        ``"primal-newton"``: :class:`dkrp.linear_svm.PrimalLinearSVC`, the same problem
        (``dual`` is ignored) solved with BLAS products, for dense features with many more
        rows than columns (on 60,000 × 1,500 MNIST KRP features, 34 s in float32 against
        liblinear's 321 s: ``bench_linear_svm``; ``max_iter`` then counts Newton iterations).
    random_state : int, default=0
        Seeds liblinear's dual coordinate descent (``dual=True``, or ``"auto"`` with fewer
        rows than features), which visits the rows in a random order: the same inputs give
        the same model on every run (unseeded, liblinear drew its seed from numpy's global
        generator).

    Returns
    -------
    dict
        ``accuracy``, ``f1_macro`` (on the test rows; ``f1`` with ``positive_label``),
        ``train_seconds`` and ``converged`` (False when the solver stopped at ``max_iter``).
    """
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = _linear_svm(solver, C=C, max_iter=max_iter, tol=tol, dual=dual,
                        random_state=random_state)
    if standardize:
        model = make_pipeline(StandardScaler(), model)
    with timer() as t, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(Z_train, y_train)
    out = _scores(y_test, model.predict(Z_test), positive_label)
    out["train_seconds"] = t["seconds"]
    out["converged"] = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return out


def kernel_svm_accuracy(X_train, y_train, X_test, y_test, *, kernel="poly", C=1.0,
                        positive_label=None, **params):
    """Train an exact-kernel ``SVC`` (e.g. ``kernel="poly", degree=2, gamma=1, coef0=0``).

    ``positive_label`` (binary problems) adds ``f1``, that class's F1 score; ``params``
    go to ``SVC`` (``cache_size`` in MB speeds up large training sets).

    Returns
    -------
    dict
        ``accuracy``, ``f1_macro`` (``f1``), ``train_seconds`` (the fit) and
        ``predict_seconds``.
    """
    from sklearn.svm import SVC

    with timer() as t:
        model = SVC(kernel=kernel, C=C, **params).fit(X_train, y_train)
    with timer() as p:
        predicted = model.predict(X_test)
    out = _scores(y_test, predicted, positive_label)
    out["train_seconds"] = t["seconds"]
    out["predict_seconds"] = p["seconds"]
    return out


def cross_validated_linear_svm(Z_train, y_train, Z_test, y_test, *, Cs, n_folds=5, seed=0,
                               gram_limit=6000, max_iter=10000):
    """A linear SVM with ``C`` chosen by ``n_folds``-fold cross-validation, then scored on test.

    The KRP paper's protocol (its footnote 9 and Section 4.4): the columns are
    standardised with the training rows' mean and deviation, every ``C`` in ``Cs`` is
    scored by stratified ``n_folds``-fold cross-validation on the training part, the best
    mean fold accuracy is the CV accuracy, and a model refit on the whole training part
    with that ``C`` gives the test accuracy.

    Parameters
    ----------
    Z_train, Z_test : ndarray
        Features (dense).
    y_train, y_test : array-like
    Cs : sequence of float
        The grid of ``C``.
    n_folds : int, default=5
    seed : int, default=0
        Shuffles the folds, and seeds liblinear's dual solver (``LinearSVC`` path).
    gram_limit : int, default=6000
        Up to this many training rows the SVM is solved in its dual on the linear-kernel
        Gram matrix ``Z Z^T`` (libsvm's ``SVC(kernel="precomputed")``: one Gram for all folds
        and every ``C``, seconds where liblinear on 3000 standardised random features takes
        minutes per ``C``); beyond it, ``LinearSVC`` on the features. The two are not the
        same problem: libsvm minimises ``C * sum(hinge) + |w|^2 / 2`` with an unpenalised
        intercept, ``LinearSVC`` (its defaults) the squared hinge
        ``C * sum(hinge^2) + (|w|^2 + b^2) / 2``, the intercept penalised like a weight.
    max_iter : int, default=10000
        liblinear's cap (``LinearSVC`` path only).

    Returns
    -------
    dict
        ``cv_accuracy`` (fraction, best mean over the folds), ``accuracy`` (test, fraction),
        ``C`` (the chosen one), ``cv_scores`` (``{C: mean fold accuracy}``),
        ``train_seconds`` (the whole search and the refit).

    Notes
    -----
    Standardising with the statistics of the whole training part lets each validation
    fold's column means and deviations (not its labels) into its training folds; with
    thousands of rows per fold the effect on the scores is far below their sampling error.
    """
    from sklearn.model_selection import StratifiedKFold
    from sklearn.svm import SVC, LinearSVC

    Z_train = np.asarray(Z_train, dtype=np.float64)
    Z_test = np.asarray(Z_test, dtype=np.float64)
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    if len(Cs) == 0:
        raise InvalidInputError("Cs must hold at least one value of C.")
    mean, std = Z_train.mean(axis=0), Z_train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    A, B = (Z_train - mean) / std, (Z_test - mean) / std
    folds = list(StratifiedKFold(n_folds, shuffle=True, random_state=seed).split(A, y_train))
    gram = A.shape[0] <= gram_limit
    scores = {}
    with timer() as t:
        K = A @ A.T if gram else None
        for C in Cs:
            hits = []
            for fit, held in folds:
                if gram:
                    model = SVC(kernel="precomputed", C=C).fit(K[np.ix_(fit, fit)], y_train[fit])
                    predicted = model.predict(K[np.ix_(held, fit)])
                else:
                    model = LinearSVC(C=C, max_iter=max_iter, random_state=seed)
                    model = model.fit(A[fit], y_train[fit])
                    predicted = model.predict(A[held])
                hits.append(float(np.mean(predicted == y_train[held])))
            scores[float(C)] = float(np.mean(hits))
        best = max(scores, key=lambda c: (scores[c], -c))  # ties: the smaller C
        if gram:
            model = SVC(kernel="precomputed", C=best).fit(K, y_train)
            predicted = model.predict(B @ A.T)
        else:
            model = LinearSVC(C=best, max_iter=max_iter, random_state=seed)
            predicted = model.fit(A, y_train).predict(B)
    return {
        "cv_accuracy": scores[best],
        "accuracy": float(np.mean(predicted == y_test)),
        "C": best,
        "cv_scores": scores,
        "train_seconds": t["seconds"],
    }


def ridge_mse(Z_train, y_train, Z_test, y_test, *, alpha=1.0):
    """Ridge regression on features (no intercept): test mean squared error and seconds.

    With random Fourier features ``Z`` this is kernel ridge regression with the
    approximate kernel ``Z Z^T``: the same objective as :func:`kernel_ridge_mse`, so the
    two MSEs converge as the number of features grows. Centre ``y`` first (neither fits
    an intercept).

    Returns
    -------
    dict
        ``mse`` and ``train_seconds``.
    """
    from sklearn.linear_model import Ridge

    with timer() as t:
        model = Ridge(alpha=alpha, fit_intercept=False).fit(Z_train, y_train)
    residual = model.predict(Z_test) - np.asarray(y_test)
    return {"mse": float(np.mean(residual ** 2)), "train_seconds": t["seconds"]}


def kernel_ridge_mse(X_train, y_train, X_test, y_test, *, gamma, alpha=1.0):
    """Exact kernel ridge regression with the RBF kernel ``exp(-gamma |x - y|^2)``.

    scikit-learn's ``KernelRidge`` (no intercept: centre ``y`` first); memory
    ``8 n_train^2`` bytes and time ``O(n_train^3)``.

    Returns
    -------
    dict
        ``mse`` and ``train_seconds``.
    """
    from sklearn.kernel_ridge import KernelRidge

    with timer() as t:
        model = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma).fit(X_train, y_train)
    residual = model.predict(X_test) - np.asarray(y_test)
    return {"mse": float(np.mean(residual ** 2)), "train_seconds": t["seconds"]}


def stratified_subsample(X, y, n, seed):
    """``n`` rows of ``(X, y)`` with the class proportions of ``y`` (all rows if fewer).

    Returns
    -------
    X_sub, y_sub
        Rows in their original order (a fixed ``seed`` gives the same rows).
    """
    if n is None or X.shape[0] <= n:
        return X, y
    from sklearn.model_selection import train_test_split

    rows = np.arange(X.shape[0])
    rows, _ = train_test_split(rows, train_size=int(n), stratify=y, random_state=seed)
    rows = np.sort(rows)
    return X[rows], np.asarray(y)[rows]



#: the linear-SVM solvers of the protocols below: the same problem, two algorithms
SVM_SOLVERS = ("liblinear", "primal-newton")


def _linear_svm(solver, *, C, max_iter, dual="auto", tol=1e-4, random_state=0):
    """``LinearSVC`` (``"liblinear"``, its dual solver seeded) or
    :class:`~dkrp.linear_svm.PrimalLinearSVC` (deterministic)."""
    check_choice("solver", solver, SVM_SOLVERS)
    if solver == "primal-newton":
        from .linear_svm import PrimalLinearSVC

        return PrimalLinearSVC(C=C, tol=tol, max_iter=max_iter)
    from sklearn.svm import LinearSVC

    return LinearSVC(C=C, max_iter=max_iter, tol=tol, dual=dual, random_state=random_state)


def select_svm_C(Z, y, grid, *, folds=3, max_rows=None, seed=0, standardize=True,
                 dual=False, max_iter=10000, positive_label=None, n_jobs=1,
                 solver="liblinear"):
    """Choose ``LinearSVC``'s ``C`` by stratified k-fold cross-validation on training rows.

    Parameters
    ----------
    Z : array-like or sparse matrix of shape (n_samples, n_features)
        Training features only (never the test rows).
    y : array-like of shape (n_samples,)
    grid : sequence of float
        The candidate values of ``C``.
    folds : int, default=3
    max_rows : int, optional
        Cross-validate on a stratified subsample of this many rows (seeded by ``seed``):
        the full training set costs ``len(grid) * folds`` full fits.
    seed : int, default=0
        The subsample's and the folds' shuffling seed; it also seeds liblinear's dual solver.
    standardize : bool, default=True
        ``StandardScaler`` in the pipeline, refitted on each training fold, as
        :func:`linear_svm_accuracy` does on the whole training set.
    dual : bool or "auto", default=False
    max_iter : int, default=10000
    positive_label : optional
        Score folds by that class's F1 (imbalanced binary data); default accuracy.
    n_jobs : int, default=1
        Folds fitted in parallel (joblib).
    solver : {"liblinear", "primal-newton"}, default="liblinear"
        As in :func:`linear_svm_accuracy`.

    Returns
    -------
    dict
        ``C`` (the best mean score; the smaller ``C`` on a tie, the stronger
        regularisation), ``scores`` (``{C: mean fold score}``), ``n_rows`` (rows
        cross-validated) and ``seconds``.
    """
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import f1_score, make_scorer
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    grid = sorted(float(c) for c in grid)
    if not grid:
        raise InvalidInputError("grid must hold at least one value of C.")
    Z, y = stratified_subsample(Z, y, max_rows, seed)
    scoring = ("accuracy" if positive_label is None
               else make_scorer(f1_score, pos_label=positive_label))
    splitter = StratifiedKFold(n_splits=int(folds), shuffle=True, random_state=seed)
    scores = {}
    with timer() as t, warnings.catch_warnings():
        # a fold stopped at max_iter still scores; the final fit reports convergence
        warnings.simplefilter("ignore", ConvergenceWarning)
        for C in grid:
            model = _linear_svm(solver, C=C, dual=dual, max_iter=max_iter, random_state=seed)
            if standardize:
                model = make_pipeline(StandardScaler(), model)
            scores[C] = float(np.mean(cross_val_score(model, Z, y, cv=splitter,
                                                      scoring=scoring, n_jobs=n_jobs,
                                                      error_score="raise")))
    best = max(grid, key=lambda C: (scores[C], -C))
    return {"C": best, "scores": scores, "n_rows": int(Z.shape[0]), "seconds": t["seconds"]}


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
    client : distributed.Client, optional
        Default: the current client, else dask's local scheduler.
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
    return max(64, int(np.ceil(n / 8)))


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


def train_on_features(Z, y, *, classifier="auto", test_size=0.25, seed=0, C=0.01, epochs=5,
                      max_in_memory_bytes=2 * 2**30, positive_label=None):
    """Train a linear classifier on (dask) features and score it on held-out rows.

    Parameters
    ----------
    Z : dask.array.Array of shape (n_samples, n_components)
    y : dask.array.Array or ndarray of shape (n_samples,)
    classifier : {"auto", "linearsvc", "sgd"}
        ``"linearsvc"``: ``StandardScaler`` + ``LinearSVC`` on the features gathered in memory
        (data that fits). ``"sgd"``: dask-ml ``Incremental(SGDClassifier(loss="hinge"))``
        streaming the row blocks, ``epochs`` passes (data that does not fit). ``"auto"``
        picks LinearSVC when the training features take less than ``max_in_memory_bytes``.
    test_size : float
        Held-out fraction (dask-ml's blockwise shuffled split, seeded).
    seed : int
        Seeds the split, the SGD and the order of the row blocks in each SGD pass, and
        liblinear's dual solver: the same features and seed give the same model and scores.
    positive_label : optional
        For binary problems, the label whose F1 is reported as ``f1`` (imbalanced
        data); default the larger label.

    Returns
    -------
    dict
        ``classifier``, ``accuracy``, ``balanced_accuracy`` (the mean of the per-class
        recalls: 1/n_classes for any predictor that ignores the input, whatever the
        class balance), ``majority_accuracy`` (the accuracy on the test rows of always
        predicting the training set's most frequent class: the baseline ``accuracy``
        must beat on imbalanced data), ``f1`` (binary, positive class) or
        ``f1_macro``, ``n_train``, ``n_test``, ``train_seconds``.
    """
    import dask.array as da
    from dask_ml.model_selection import train_test_split
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score

    if not isinstance(y, da.Array):
        y = da.from_array(np.asarray(y), chunks=(Z.chunks[0],))
    elif y.chunks[0] != Z.chunks[0]:
        y = y.rechunk((Z.chunks[0],))
    Z_tr, Z_te, y_tr, y_te = train_test_split(Z, y, test_size=test_size, random_state=seed,
                                              shuffle=True, blockwise=True)
    classes = np.unique(y.compute())
    n_train = int(sum(Z_tr.chunks[0])) if not np.isnan(sum(Z_tr.chunks[0])) else None
    if classifier == "auto":
        nbytes = (n_train or Z.shape[0]) * Z.shape[1] * Z.dtype.itemsize
        classifier = "linearsvc" if nbytes <= max_in_memory_bytes else "sgd"
    with timer() as t:
        if classifier == "linearsvc":
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import StandardScaler
            from sklearn.svm import LinearSVC

            Ztr, ytr = da.compute(Z_tr, y_tr)
            # products of projections are heavy-tailed: scale columns before the SVM
            model = make_pipeline(StandardScaler(), LinearSVC(C=C, max_iter=10000,
                                                                random_state=seed))
            model.fit(Ztr, ytr)
            Zte, yte = da.compute(Z_te, y_te)
            pred = model.predict(Zte)
        elif classifier == "sgd":
            from dask_ml.preprocessing import StandardScaler
            from dask_ml.wrappers import Incremental
            from sklearn.linear_model import SGDClassifier

            scaler = StandardScaler().fit(Z_tr)  # one pass; streamed, never gathered
            Z_tr, Z_te = scaler.transform(Z_tr), scaler.transform(Z_te)
            # dask-ml shuffles the block order of every pass: seeded here (a fresh
            # RandomState per call, so each epoch has its own order and a rerun the same)
            model = Incremental(SGDClassifier(loss="hinge", alpha=1e-4, random_state=seed),
                                random_state=np.random.RandomState(seed))
            for _ in range(max(1, int(epochs))):
                model.partial_fit(Z_tr, y_tr, classes=classes)
            pred, yte = da.compute(model.predict(Z_te), y_te)
        else:
            raise InvalidInputError(
                f"classifier must be 'auto', 'linearsvc' or 'sgd'; got {classifier!r}"
            )
    train_labels, train_counts = np.unique(y_tr.compute(), return_counts=True)
    majority = train_labels[np.argmax(train_counts)]
    out = {
        "classifier": classifier,
        "accuracy": float(accuracy_score(yte, pred)),
        "balanced_accuracy": float(balanced_accuracy_score(yte, pred)),
        "majority_accuracy": float(np.mean(np.asarray(yte) == majority)),
        "n_train": n_train,
        "n_test": int(len(yte)),
        "train_seconds": t["seconds"],
    }
    if len(classes) == 2:
        pos = classes.max() if positive_label is None else positive_label
        out["f1"] = float(f1_score(yte, pred, pos_label=pos))
    else:
        out["f1_macro"] = float(f1_score(yte, pred, average="macro"))
    return out
