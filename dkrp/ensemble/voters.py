"""One voter of the ensemble, and the vote (the code that runs on the workers).

A voter is a random feature map and a linear model, each seeded from the ensemble
seed (:func:`voter_seeds`, the seed contract's ``"ensemble.voter"`` stream). This
module owns: the seeds, the choice of linear model (:func:`make_model`, the
:data:`AUTO_SOLVER`), the task that trains one voter (:func:`train_voter`,
liblinear's lock), the scores of one voter, the majority vote with its tie rule
(:func:`hard_vote`) and the votes of all voters on a row block
(:func:`ensemble_block`), and the rebuilding of a fitted voter from its arrays.
See :mod:`dkrp.ensemble` for the measurements behind the solver rule.
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from .._random import block_generator
from .._spec import plain_json
from .._validation import check_finite_rows
from ..errors import InvalidInputError, Message, Param, PartitionInputError, SpecError

#: Named stream of the seed contract from which voter seeds are drawn.
VOTER_STREAM = "ensemble.voter"
#: The solver ``estimator="auto"`` picks (:func:`make_model`).
AUTO_SOLVER = "newton"
_MAX_SEED = 2**63 - 1
#: liblinear (LinearSVC, LogisticRegression's liblinear solver) draws from one
#: process-wide generator seeded per fit: two fits in threads of one process would
#: interleave its draws and change each other's coefficients, so they take turns.
_LIBLINEAR_LOCK = threading.Lock()
#: Linear models a saved ensemble may name (loading imports nothing else): those a
#: voter is rebuilt as from its ``coef_``, ``intercept_`` and ``classes_`` alone.
#: (``RidgeClassifier`` is not one: it reads ``classes_`` from a label binarizer, and its
#: closed-form solvers leave ``n_iter_`` None; no ensemble of it could ever be trained.)
_MODEL_CLASSES = {
    "LinearSVC": "sklearn.svm",
    "SGDClassifier": "sklearn.linear_model",
    "LogisticRegression": "sklearn.linear_model",
    "Perceptron": "sklearn.linear_model",
    "PassiveAggressiveClassifier": "sklearn.linear_model",
    "PrimalLinearSVC": "dkrp.linear_svm",
}
#: The names of ``estimator=`` that pick a linear model (:func:`make_model`).
SOLVERS = ("auto", "newton", "primal", "dual", "sgd")


def removed_name(module, name, stacklevel=3):
    """The value of a public name that is gone, with a ``FutureWarning`` (or AttributeError)."""
    if name != "SGD_MIN_SAMPLES":
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn("SGD_MIN_SAMPLES is gone: estimator='auto' picks the primal Newton solver "
                  "at every size measured (AUTO_SOLVER) and no longer switches to SGD.",
                  FutureWarning, stacklevel=stacklevel)
    return 100_000


def __getattr__(name):
    return removed_name(__name__, name)


def voter_seeds(seed: int, index: int) -> tuple[int, int]:
    """``(projector_seed, model_seed)`` of voter ``index`` of an ensemble seeded ``seed``.

    Examples
    --------
    >>> voter_seeds(0, 1) == voter_seeds(0, 1) != voter_seeds(0, 2)
    True
    """
    rng = block_generator(seed, VOTER_STREAM, index)
    projector_seed = int(rng.integers(0, _MAX_SEED, dtype=np.int64))
    model_seed = int(rng.integers(0, 2**32 - 1, dtype=np.int64))  # scikit-learn's range
    return projector_seed, model_seed


#: The class names ``estimator=`` may be an instance of (:func:`linear_model_class`).
LINEAR_MODELS = tuple(sorted(_MODEL_CLASSES))


def linear_model_class(name):
    import importlib

    if name not in _MODEL_CLASSES:
        raise SpecError(f"Unknown linear model {name!r}; a saved ensemble may name "
                        f"{sorted(_MODEL_CLASSES)}.")
    return getattr(importlib.import_module(_MODEL_CLASSES[name]), name)


def make_model(solver, C, n_samples, n_components, random_state):
    """The linear model ``solver`` picks for ``n_samples`` rows of ``n_components`` features.

    ``"newton"``: :class:`dkrp.PrimalLinearSVC`; ``"primal"`` and ``"dual"``:
    ``LinearSVC(dual=False)`` and ``LinearSVC(dual=True)`` (liblinear); ``"sgd"``: averaged
    ``SGDClassifier(loss="hinge", alpha=1/(C n))``. ``"auto"``: :data:`AUTO_SOLVER`, the
    fastest in every cell of the measured table (``benchmarks/bench_voter_solvers.py``:
    2,000 to 300,000 rows by 500 and 2,000 features; see :mod:`dkrp.ensemble`). A voter's
    features are dense (every dkrp map's are), which ``"newton"`` needs.
    """
    from sklearn.linear_model import SGDClassifier
    from sklearn.svm import LinearSVC

    if solver == "auto":
        solver = AUTO_SOLVER
    if solver == "newton":
        from ..linear_svm import PrimalLinearSVC

        return PrimalLinearSVC(C=C)
    if solver == "sgd":
        # averaged: the mean iterate converges where the last one wanders (plain SGD ran
        # its 50 epochs without meeting tol on 100,000 rows, issue 33)
        return SGDClassifier(loss="hinge", alpha=1.0 / (C * max(n_samples, 1)), tol=1e-4,
                             max_iter=200, average=True, random_state=random_state)
    return LinearSVC(C=C, dual=solver == "dual", random_state=random_state)


# -- worker side ------------------------------------------------------------------------


def train_voter(X, y, projector, model, index, partition=None, row_offset=0):
    """Fit one voter: its map on ``X``, then the linear model on the features.

    Module-level and pure (it pickles by reference). The features stay here; the
    result is the projector spec and the model's coefficients.
    """
    from sklearn.exceptions import ConvergenceWarning

    from .._blockwise import task_threads, worker_address
    from .._threading import blas_one_thread, limit_threads

    t0 = time.perf_counter()
    where = f"partition {partition} (rows {row_offset}..{row_offset + X.shape[0] - 1})" \
        if partition is not None else "the training data"
    if partition is not None:
        check_finite_rows(X, row_offset=row_offset, partition=partition)
        if X.shape[0] != np.shape(y)[0]:
            raise PartitionInputError(
                f"Partition {partition} has {X.shape[0]} rows of X but {np.shape(y)[0]} "
                "labels.", partition=partition)
    y = np.asarray(y)
    labels = np.unique(y)
    if labels.size < 2:
        said = "Voter {} was given one class only ({!r}) in {}: a classifier needs at least two."
        if partition is None:
            # every voter sees all rows (y holds one class, though classes= names more):
            # shuffling or another strategy would not help
            raise InvalidInputError(Message(said, index, plain_json(labels[0]), where))
        raise InvalidInputError(Message(
            said + " Shuffle the rows before ingesting (partition voters see one row block "
            "each) or use {}.", index, plain_json(labels[0]), where, Param("strategy", "full")))
    projector = clone(projector)
    model = clone(model)
    # BLAS on one thread: the solvers' products are small and memory-bound, and a
    # multi-threaded BLAS on a busy machine made newton fits 10-15x slower
    with limit_threads(task_threads()), blas_one_thread():
        projector.fit(X)
        Z = projector.transform(X)
        if type(model).__name__ == "PrimalLinearSVC":
            # float32 products: 1.4-1.7x faster, the same test accuracy (6 of 6 fits, issue 33)
            Z = Z.astype(np.float32, copy=False)
        lock = _LIBLINEAR_LOCK if _uses_liblinear(model) else contextlib.nullcontext()
        with lock, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model.fit(Z, y)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    n_iter = np.max(np.atleast_1d(getattr(model, "n_iter_", -1)))
    return {
        "index": int(index),
        "partition": None if partition is None else int(partition),
        "n_rows": int(X.shape[0]),
        "spec": projector.to_spec(),
        "model_class": type(model).__name__,
        "model_params": model.get_params(deep=False),
        "coef": np.ascontiguousarray(model.coef_, dtype=np.float64),
        "intercept": np.atleast_1d(np.asarray(model.intercept_, dtype=np.float64)),
        "classes": np.asarray(model.classes_),
        "n_iter": int(n_iter),
        "converged": bool(converged),
        "seconds": time.perf_counter() - t0,
        "worker": worker_address(),
    }


def _uses_liblinear(model):
    name = type(model).__name__
    return name == "LinearSVC" or (name == "LogisticRegression"
                                   and model.get_params().get("solver") == "liblinear")


def _voter_scores(Z, coef, intercept, class_idx, n_classes):
    """One voter's ``(label index, scores over all classes)`` for features ``Z``.

    The label is what the voter's own ``predict`` gives (binary: ``d > 0``;
    multi-class: ``argmax``). Classes the voter never saw (a partition voter) score
    NaN: it has no opinion of them, and the soft vote (:func:`soft_scores`) averages
    each class over the voters that saw it.
    """
    d = Z @ coef.T + intercept
    if coef.shape[0] == 1:
        d = d[:, 0]
        label = class_idx[(d > 0).astype(np.intp)]
        own = np.stack([-d, d], axis=1)
    else:
        label = class_idx[d.argmax(axis=1)]
        own = d
    if own.shape[1] == n_classes:
        scores = own
    else:
        scores = np.full((own.shape[0], n_classes), np.nan)
        scores[:, class_idx] = own
    return label, scores


def soft_scores(total, seen):
    """Each class's mean score over the voters that saw it.

    Parameters
    ----------
    total : ndarray of shape (n_samples, n_classes)
        Sum of the voters' scores of each class (a voter that did not see a class adds 0).
    seen : ndarray of shape (n_classes,)
        How many voters saw each class.

    Notes
    -----
    A partition voter that never saw a class has no score for it. Scoring it "one below
    the row's lowest" (dkrp before issue 28) let voters that never saw a class vote
    against it: on digits split so that row blocks 0–1 hold classes 0–5 and blocks 2–3
    classes 4–9, the soft vote fell to 0.374 where the hard vote reached 0.712. Averaging
    each class over the voters that saw it compares every class by the judgement of its
    own experts (tests/test_ensemble.py measures both layouts). A class no voter saw
    scores ``-inf``.

    Examples
    --------
    >>> soft_scores(np.array([[2.0, 1.0, 3.0]]), np.array([2, 1, 3])).tolist()
    [[1.0, 1.0, 1.0]]
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.asarray(total, dtype=np.float64) / np.asarray(seen)
    mean[:, np.asarray(seen) == 0] = -np.inf
    return mean


def hard_vote(votes, n_classes):
    """Majority vote of label indices ``votes`` (n_samples, n_voters); ties to the lowest.

    Examples
    --------
    >>> hard_vote(np.array([[2, 1, 1, 2], [0, 2, 2, 0]]), 3).tolist()
    [1, 0]
    """
    votes = np.asarray(votes, dtype=np.intp)
    counts = np.zeros((votes.shape[0], n_classes), dtype=np.int64)
    np.add.at(counts, (np.arange(votes.shape[0])[:, None], votes), 1)
    return counts.argmax(axis=1)  # the first maximum: the lowest class label


def ensemble_block(block, payload, n_classes, voting, what, n_features, offsets=None,
                   block_info=None):
    """Votes of all voters on one row block (used in process and in map_blocks).

    Each voter's features come from :func:`dkrp._blockwise.transform_partition`, the
    block path of every map (its spec, dtype, CSR, scaling and thread limit); the block's
    values are checked once here, for all voters.
    """
    from .._blockwise import task_threads, transform_partition
    from .._threading import limit_threads

    partition = None
    offset = 0
    if block_info is not None and offsets is not None:
        partition = block_info[0]["chunk-location"][0]
        offset = offsets[partition]
    block = block.tocsr().astype(np.float64) if sp.issparse(block) else np.asarray(
        block, dtype=np.float64)
    if block.ndim != 2 or block.shape[1] != n_features:
        raise PartitionInputError(
            f"Partition {partition} has shape {block.shape}, but the ensemble is expecting "
            f"{n_features} features as input.", partition=partition)
    check_finite_rows(block, row_offset=offset, partition=partition)
    votes = np.empty((block.shape[0], len(payload)), dtype=np.int32)
    total = np.zeros((block.shape[0], n_classes))
    seen = np.zeros(n_classes, dtype=np.int64)
    for j, (spec_text, coef, intercept, class_idx) in enumerate(payload):
        Z = transform_partition(block, spec_text, "float64", offset, partition, checked=True)
        with limit_threads(task_threads()):
            votes[:, j], scores = _voter_scores(Z, coef, intercept, class_idx, n_classes)
        if voting == "soft" or what == "scores":
            total += np.nan_to_num(scores, nan=0.0)
            seen[np.unique(class_idx)] += 1
    if what == "votes":
        return votes
    if what == "scores":
        return soft_scores(total, seen)
    if voting == "soft":
        return soft_scores(total, seen).argmax(axis=1)
    return hard_vote(votes, n_classes)


def solver_name(model_class, params):
    if model_class == "LinearSVC":
        return "LinearSVC(dual=True)" if params.get("dual") is True else "LinearSVC(dual=False)"
    return model_class


def voter_pipeline(projector, model_class, model_params, coef, intercept, classes):
    """A fitted ``Pipeline(features, svm)`` from a projector and a linear model's arrays."""
    from sklearn.pipeline import Pipeline

    model = linear_model_class(model_class)(**model_params)
    model.coef_ = np.asarray(coef, dtype=np.float64)
    model.intercept_ = np.asarray(intercept, dtype=np.float64)
    model.classes_ = np.asarray(classes)
    model.n_features_in_ = int(model.coef_.shape[1])
    return Pipeline([("features", projector), ("svm", model)])
