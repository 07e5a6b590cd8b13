"""Evaluation protocols: linear models on random features against exact kernel machines.

The small protocols the demo (:mod:`dkrp.demo`), the pipelines' reports and the
experiments are made of: linear-SVM accuracy and F1, a cross-validated C, ridge and
kernel ridge MSE, exact-kernel SVMs, and a linear classifier trained on (dask) features.

Nothing here prints: results come back as dicts for the caller to show.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from ._validation import check_choice
from .errors import InvalidInputError

__all__ = [
    "cross_validated_linear_svm",
    "kernel_ridge_mse",
    "kernel_svm_accuracy",
    "linear_svm_accuracy",
    "ridge_mse",
    "select_svm_C",
    "stratified_subsample",
    "train_on_features",
]



#: Names that moved to :mod:`dkrp.demo` (0.2.x): still found here, with a warning.
_MOVED_TO_DEMO = ("DEMO_DATASETS", "DEMO_MAX_ITER", "load_demo_dataset", "run_demo")


def __getattr__(name):
    if name in _MOVED_TO_DEMO:
        import importlib
        import warnings

        warnings.warn(f"dkrp.evaluation.{name} moved to dkrp.demo.{name}; import it from "
                      "there.", FutureWarning, stacklevel=2)
        return getattr(importlib.import_module("dkrp.demo"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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
                        positive_label=None, multiclass="ovo", **params):
    """Train an exact-kernel ``SVC`` (e.g. ``kernel="poly", degree=2, gamma=1, coef0=0``).

    ``positive_label`` (binary problems) adds ``f1``, that class's F1 score; ``params``
    go to ``SVC`` (``cache_size`` in MB speeds up large training sets). ``multiclass``
    is ``"ovo"`` (``SVC``'s own one-vs-one) or ``"ovr"`` (one ``SVC`` per class in a
    ``OneVsRestClassifier``, as the SRF review's exact column).

    Returns
    -------
    dict
        ``accuracy``, ``f1_macro`` (``f1``), ``train_seconds`` (the fit) and
        ``predict_seconds``.
    """
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import SVC

    model = SVC(kernel=kernel, C=C, **params)
    if check_choice("multiclass", multiclass, ("ovo", "ovr")) == "ovr":
        model = OneVsRestClassifier(model)
    with timer() as t:
        model.fit(X_train, y_train)
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
        picks LinearSVC when the training features take at most ``max_in_memory_bytes``.
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
