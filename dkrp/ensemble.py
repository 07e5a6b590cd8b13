r"""Ensembles of random-feature linear SVMs with a majority vote, trained on Dask.

Each voter is a random feature map with its own seed followed by a linear SVM;
the ensemble takes the majority vote (Rost & Zast 2023, sections 2.4 and 5.4,
after Schclar & Rokach's random projection ensembles). Voters differ only by
their seeds, so a 13-voter ensemble of 300-feature maps is 13 cheap, diverse
approximations of one RBF-kernel SVM.

Seeds
    Voter ``i`` draws its projector seed and its linear model's ``random_state``
    from ``block_generator(seed, "ensemble.voter", i)`` (the seed contract of
    :mod:`dkrp._random`): the same ensemble seed gives the same voters on any
    cluster, in any order, after any worker failure.

Training strategies (both on the cluster when a ``distributed.Client`` is given,
or is the default client; in this process otherwise)
    ``"full"``
        every voter sees all training rows. ``X`` reaches each worker once (a
        NumPy ``X`` is scattered with ``broadcast=True``; a dask ``X`` is
        assembled on a worker from its graph, so a lost copy is recomputed) and
        voters train in parallel, one task each. Features are computed inside the
        voter's task and never leave it; a task returns its projector spec and
        ``coef_``/``intercept_`` only.
    ``"partition"``
        one voter per row block, trained where the block lives, through dask-ml's
        :class:`~dask_ml.ensemble.BlockwiseVotingClassifier` (subclassed: its
        ``fit`` clones one estimator for every block, which would give every
        voter the same seed, and its ``predict`` votes on raw label values with
        ``bincount``). ``n_voters`` row blocks: a dask ``X`` with another number
        of blocks is rechunked; give the store ``chunk_rows = n / n_voters`` to
        avoid moving data.

Linear model (``estimator="auto"``)
    ``LinearSVC(dual=True)`` (liblinear's dual coordinate descent) below
    :data:`SGD_MIN_SAMPLES` rows per voter, ``SGDClassifier(loss="hinge",
    alpha=1/(C n))`` (the same objective, a few epochs) from there on. The primal
    solver (``LinearSVC(dual=False)``, trust-region Newton), the usual advice for
    ``n >> D``, was measured slower on random features: one 500-RFF voter on
    pooled MNIST took 2.5 s primal / 0.9 s dual / 1.4 s SGD at 5,000 rows
    (accuracy 94.05 / 94.05 / 93.10 %) and 34.0 s / 12.0 s / 4.6 s at 20,000
    rows (93.15 / 93.15 / 92.35 %). ``estimator="primal"`` remains available.
    The SGD threshold is an extrapolation of those two sizes (SGD grows about
    linearly in n and holds no dual variables), not a measurement at 100,000
    rows. ``pipelines/experiments/ensemble_thesis.py`` measures the three
    (``results/ensemble/solvers.csv``).

    liblinear draws from one process-wide generator, so liblinear fits in
    threads of one process take turns (a lock): run voters in worker
    processes (dkrp's clusters have one thread per worker) for parallelism.

Voting
    ``"hard"``: each voter predicts a label, the most frequent label wins; ties
    go to the lowest class label (the first of ``classes_``), as in
    scikit-learn's ``VotingClassifier`` (``argmax`` of a ``bincount``).
    ``"soft"``: the voters' decision functions are averaged and the largest
    mean wins.

Saving
    :meth:`RandomFeatureVotingClassifier.save` writes a directory holding
    ``dkrp.json`` (parameters, each voter's projector spec and linear model,
    classes, versions, the SHA-256 of the arrays file) and ``voters.npz``
    (``coef_``, ``intercept_``); :func:`dkrp.load` reads it back with
    ``np.load(..., allow_pickle=False)`` after checking the SHA-256, so a
    tampered or truncated file is refused before anything in it is read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from . import _spec
from ._random import block_generator, resolve_seed
from ._validation import check_choice, check_finite_rows, check_integer, is_dask_collection
from .errors import PartitionInputError, SpecError

logger = logging.getLogger(__name__)

__all__ = [
    "ENSEMBLE_FORMAT",
    "RandomFeatureVotingClassifier",
    "SGD_MIN_SAMPLES",
    "VOTER_STREAM",
    "load_ensemble",
    "voter_seeds",
]

ENSEMBLE_FORMAT = "dkrp.ensemble"
ENSEMBLE_FORMAT_VERSION = 1
#: Named stream of the seed contract from which voter seeds are drawn.
VOTER_STREAM = "ensemble.voter"
#: From this many training rows per voter on, ``estimator="auto"`` uses SGD.
SGD_MIN_SAMPLES = 100_000
MANIFEST = "dkrp.json"
ARRAYS = "voters.npz"
_MAX_SEED = 2**63 - 1
#: liblinear (LinearSVC, LogisticRegression's liblinear solver) draws from one
#: process-wide generator seeded per fit: two fits in threads of one process would
#: interleave its draws and change each other's coefficients, so they take turns.
_LIBLINEAR_LOCK = threading.Lock()
_STRATEGIES = ("full", "partition")
_VOTING = ("hard", "soft")
_SOLVERS = ("auto", "primal", "dual", "sgd")
#: Linear models a saved ensemble may name (loading imports nothing else).
_MODEL_CLASSES = {
    "LinearSVC": "sklearn.svm",
    "SGDClassifier": "sklearn.linear_model",
    "LogisticRegression": "sklearn.linear_model",
    "RidgeClassifier": "sklearn.linear_model",
    "Perceptron": "sklearn.linear_model",
    "PassiveAggressiveClassifier": "sklearn.linear_model",
}


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


def _model_class(name):
    import importlib

    if name not in _MODEL_CLASSES:
        raise SpecError(f"Unknown linear model {name!r}; a saved ensemble may name "
                        f"{sorted(_MODEL_CLASSES)}.")
    return getattr(importlib.import_module(_MODEL_CLASSES[name]), name)


def make_model(solver, C, n_samples, n_components, random_state):
    """The linear model ``solver`` picks for ``n_samples`` rows of ``n_components`` features.

    ``"auto"``: ``"sgd"`` from :data:`SGD_MIN_SAMPLES` rows, else ``"dual"`` (see the
    module notes for the measurements behind this rule).
    """
    from sklearn.linear_model import SGDClassifier
    from sklearn.svm import LinearSVC

    if solver == "auto":
        solver = "sgd" if n_samples >= SGD_MIN_SAMPLES else "dual"
    if solver == "sgd":
        return SGDClassifier(loss="hinge", alpha=1.0 / (C * max(n_samples, 1)), tol=1e-4,
                             max_iter=50, random_state=random_state)
    return LinearSVC(C=C, dual=solver == "dual", random_state=random_state)


# -- worker side ------------------------------------------------------------------------


def _task_threads():
    from ._blockwise import _task_threads as threads

    return threads()


def _worker_address():
    from ._blockwise import _worker_address as address

    return address()


def _train_voter(X, y, projector, model, index, partition=None, row_offset=0):
    """Fit one voter: its map on ``X``, then the linear model on the features.

    Module-level and pure (it pickles by reference). The features stay here; the
    result is the projector spec and the model's coefficients.
    """
    from sklearn.exceptions import ConvergenceWarning

    from ._threading import limit_threads

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
        raise ValueError(
            f"Voter {index} was given one class only ({labels[0]!r}) in {where}: a "
            "classifier needs at least two. Shuffle the rows before ingesting (partition "
            "voters see one row block each) or use strategy='full'."
        )
    projector = clone(projector)
    model = clone(model)
    with limit_threads(_task_threads()):
        projector.fit(X)
        Z = projector.transform(X)
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
        "worker": _worker_address(),
    }


def _uses_liblinear(model):
    name = type(model).__name__
    return name == "LinearSVC" or (name == "LogisticRegression"
                                   and model.get_params().get("solver") == "liblinear")


def _voter_scores(Z, coef, intercept, class_idx, n_classes):
    """One voter's ``(label index, scores over all classes)`` for features ``Z``.

    The label is what the voter's own ``predict`` gives (binary: ``d > 0``;
    multi-class: ``argmax``). Scores of classes the voter never saw (a partition
    voter) are set one below the row's lowest score.
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
        scores = np.repeat(own.min(axis=1, keepdims=True) - 1.0, n_classes, axis=1)
        scores[:, class_idx] = own
    return label, scores


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


def _ensemble_block(block, payload, n_classes, voting, what, n_features, offsets=None,
                    block_info=None):
    """Votes of all voters on one row block (used in process and in map_blocks)."""
    from ._blockwise import _cached_projector
    from ._threading import limit_threads

    partition = None
    offset = 0
    if block_info is not None and offsets is not None:
        partition = block_info[0]["chunk-location"][0]
        offset = offsets[partition]
    if sp.issparse(block):
        block = block.tocsr().astype(np.float64)
    else:
        block = np.asarray(block, dtype=np.float64)
    if block.ndim != 2 or block.shape[1] != n_features:
        raise PartitionInputError(
            f"Partition {partition} has shape {block.shape}, but the ensemble is expecting "
            f"{n_features} features as input.", partition=partition)
    check_finite_rows(block, row_offset=offset, partition=partition)
    votes = np.empty((block.shape[0], len(payload)), dtype=np.int32)
    total = np.zeros((block.shape[0], n_classes))
    with limit_threads(_task_threads()):
        for j, (spec_text, coef, intercept, class_idx) in enumerate(payload):
            Z = _cached_projector(spec_text).transform_block(block)
            votes[:, j], scores = _voter_scores(Z, coef, intercept, class_idx, n_classes)
            if voting == "soft" or what == "scores":
                total += scores
    if what == "votes":
        return votes
    if what == "scores":
        return total / len(payload)
    if voting == "soft":
        return total.argmax(axis=1)
    return hard_vote(votes, n_classes)


# -- the partition strategy through dask-ml ------------------------------------------------


def _blockwise_class():
    from dask_ml.ensemble import BlockwiseVotingClassifier

    class SeededBlockwiseVotingClassifier(BlockwiseVotingClassifier):
        """dask-ml's blockwise voter, one seed per block (see :mod:`dkrp.ensemble`).

        ``voters`` is a list of ``(projector, model)`` with their own seeds, one per
        row block; ``fit`` returns the futures (or results) of :func:`_train_voter`.
        """

        def __init__(self, estimator=None, voting="hard", classes=None, voters=None):
            super().__init__(estimator, voting=voting, classes=classes)
            self.voters = voters

        def fit_tasks(self, X, y):
            import dask

            from ._blockwise import row_offsets

            Xs = X.to_delayed().flatten()
            ys = y.to_delayed().flatten()
            if len(Xs) != len(ys):
                raise ValueError(
                    f"The number of blocks in X and y must match. {len(Xs)} != {len(ys)}")
            if len(Xs) != len(self.voters):
                raise ValueError(f"{len(Xs)} row blocks for {len(self.voters)} voters.")
            offsets = row_offsets(X.chunks[0])
            train = dask.delayed(_train_voter, pure=True)
            return [
                train(Xb, yb, proj, model, i, partition=i, row_offset=offsets[i],
                      dask_key_name=f"dkrp-voter-{dask.base.tokenize(Xb.key, i)}")
                for i, (Xb, yb, (proj, model)) in enumerate(zip(Xs, ys, self.voters, strict=True))
            ]

    return SeededBlockwiseVotingClassifier


# -- the estimator -------------------------------------------------------------------------


def _default_client():
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _progress_callback(progress, total):
    if callable(progress):
        return progress, None
    if not progress:
        return (lambda done, total: None), None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc="voters", unit="voter")

    def update(done, total):
        bar.n = done
        bar.refresh()

    return update, bar


class RandomFeatureVotingClassifier(ClassifierMixin, BaseEstimator):
    r"""Majority vote of random-feature linear SVMs, each with its own seed.

    Parameters
    ----------
    n_voters : int, default=13
        Number of voters (13 in the thesis: more voters than classes). One voter
        is a single random-feature linear SVM.
    method : str or BaseProjector, default="rff"
        A ``--method`` name of :mod:`dkrp.methods` or a dkrp projector used as a
        template (cloned; each voter gets its own ``random_state``).
    n_components : int or None, default=500
        Features per voter (``None`` keeps the template's).
    gamma : float, "scale" or None, default=None
        Kernel width for methods that take one. ``None``: ``"scale"``
        (:math:`1/(d\,\mathrm{Var}X)`, scikit-learn's SVC default) for ``"rff"``,
        the method's default otherwise. ``"scale"`` is resolved once from all
        training rows, so every voter has the same kernel.
    C : float, default=1.0
        Regularisation of the linear SVMs.
    estimator : {"auto", "primal", "dual", "sgd"} or classifier, default="auto"
        The linear model: ``LinearSVC(dual=False)``, ``LinearSVC(dual=True)``,
        ``SGDClassifier(loss="hinge")``; ``"auto"`` picks dual below
        :data:`SGD_MIN_SAMPLES` rows per voter and SGD above (measured, see the
        module notes); or any scikit-learn linear classifier with ``coef_`` and
        ``intercept_`` (cloned; ``C`` is not applied to it).
    voting : {"hard", "soft"}, default="hard"
        Majority vote of labels (ties to the lowest label) or the mean decision
        function.
    strategy : {"full", "partition"}, default="full"
        Every voter sees all rows, or voter ``i`` sees row block ``i``.
    classes : array-like or None, default=None
        The labels (dask-ml's ``classes=``); default: those in ``y``.
    random_state : int or None, default=None
        The ensemble seed; voter seeds derive from it (``VOTER_STREAM``).

    Attributes
    ----------
    estimators_ : list of sklearn.pipeline.Pipeline
        Voter ``i``: its fitted projector then its linear model.
    classes_ : ndarray of shape (n_classes,)
    n_features_in_ : int
    seed_ : int
    voter_info_ : list of dict
        Per voter: seconds, worker, partition, rows, solver iterations, convergence.
    fit_seconds_ : float
    """

    def __init__(self, n_voters=13, method="rff", n_components=500, gamma=None, C=1.0,
                 estimator="auto", voting="hard", strategy="full", classes=None,
                 random_state=None):
        self.n_voters = n_voters
        self.method = method
        self.n_components = n_components
        self.gamma = gamma
        self.C = C
        self.estimator = estimator
        self.voting = voting
        self.strategy = strategy
        self.classes = classes
        self.random_state = random_state

    # -- parameters ------------------------------------------------------------------
    def _check_params(self):
        check_integer("n_voters", self.n_voters, minimum=1)
        if self.n_components is not None:
            check_integer("n_components", self.n_components, minimum=1)
        check_choice("voting", self.voting, _VOTING)
        check_choice("strategy", self.strategy, _STRATEGIES)
        if isinstance(self.estimator, str):
            check_choice("estimator", self.estimator, _SOLVERS)
        elif not hasattr(self.estimator, "fit"):
            raise ValueError(f"estimator must be one of {_SOLVERS} or a classifier, got "
                             f"{self.estimator!r}.")
        if not (isinstance(self.C, (int, float)) and np.isfinite(self.C) and self.C > 0):
            raise ValueError(f"C must be a positive number, got {self.C!r}.")

    def _template(self):
        from .base import BaseProjector
        from .methods import METHODS, make_projector

        if isinstance(self.method, BaseProjector):
            projector = clone(self.method)
            if self.n_components is not None:
                projector.set_params(n_components=self.n_components)
            if self.gamma is not None:
                projector.set_params(gamma=self.gamma)
            return projector
        if not isinstance(self.method, str):
            raise ValueError(f"method must be a --method name or a dkrp projector, got "
                             f"{self.method!r}.")
        gamma = self.gamma
        if gamma is None and self.method in METHODS and "gamma" in METHODS[self.method].options:
            gamma = "scale" if self.method == "rff" else None
        return make_projector(self.method, n_components=self.n_components, gamma=gamma)

    def _voters(self, seed, template, n_rows):
        voters = []
        for i in range(self.n_voters):
            proj_seed, model_seed = voter_seeds(seed, i)
            projector = clone(template).set_params(random_state=proj_seed)
            if isinstance(self.estimator, str):
                k = getattr(template, "n_components", None) or 0
                model = make_model(self.estimator, float(self.C), n_rows, k, model_seed)
            else:
                model = clone(self.estimator)
                if "random_state" in model.get_params():
                    model.set_params(random_state=model_seed)
            voters.append((projector, model))
        return voters

    # -- fit -------------------------------------------------------------------------
    def fit(self, X, y, *, client=None, progress=False):
        """Train the voters (on ``client``, the default client, or in this process).

        Parameters
        ----------
        X : array-like, sparse matrix or dask array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,)
        client : distributed.Client, optional
            Default: ``distributed.default_client()`` when there is one.
        progress : bool or callable, default=False
            ``True`` shows a bar of voters done / total; a callable is called as
            ``progress(done, total)`` after each voter.

        Returns
        -------
        self
        """
        self._check_params()
        t0 = time.perf_counter()
        dask_input = is_dask_collection(X)
        if dask_input:
            X, y = self._check_dask_xy(X, y)
        else:
            X, y = self._check_xy(X, y)
        self.n_features_in_ = int(X.shape[1])
        classes = self._classes(y, dask_input)
        template = self._template()
        if getattr(template, "gamma", None) == "scale":
            from .kernels import scale_gamma

            template.set_params(gamma=float(scale_gamma(X, getattr(template, "kernel",
                                                                     "gaussian"))))
        self.seed_ = resolve_seed(self.random_state)
        n_rows = int(X.shape[0])
        if self.strategy == "partition":
            n_rows = -(-n_rows // self.n_voters)
        voters = self._voters(self.seed_, template, n_rows)
        if client is None:
            client = _default_client()
        report, bar = _progress_callback(progress, self.n_voters)
        try:
            if self.strategy == "full":
                results = self._fit_full(X, y, voters, client, report, dask_input)
            else:
                results = self._fit_partition(X, y, voters, client, report, dask_input)
        finally:
            if bar is not None:
                bar.close()
        self._set_voters(results, classes, template)
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def _check_xy(self, X, y):
        from sklearn.utils import check_array, check_consistent_length, column_or_1d

        X = check_array(X, accept_sparse="csr", dtype=(np.float64, np.float32),
                        ensure_all_finite=False)
        y = column_or_1d(y, warn=True)
        check_consistent_length(X, y)
        check_finite_rows(X)
        return X, y

    def _check_dask_xy(self, X, y):
        from ._blockwise import row_offsets

        if X.ndim != 2:
            raise ValueError(f"Expected 2D array, got {X.ndim}D array instead.")
        if not is_dask_collection(y):
            import dask.array as da

            y = da.from_array(np.asarray(y), chunks=(X.chunks[0],))
        if y.ndim != 1:
            raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
        if np.isnan(X.shape[0]) or any(np.isnan(c) for c in X.chunks[0]):
            raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() first.")
        if X.shape[0] != y.shape[0]:
            raise ValueError("Found input variables with inconsistent numbers of samples: "
                             f"[{X.shape[0]}, {y.shape[0]}]")
        if X.dtype.kind not in "biuf":
            raise ValueError(f"dask array X must be numeric, got dtype {X.dtype}.")
        if len(X.chunks[1]) != 1:
            X = X.rechunk({1: -1})
        if self.strategy == "partition" and len(X.chunks[0]) != self.n_voters:
            n = int(X.shape[0])
            if n < self.n_voters:
                raise ValueError(f"{n} rows cannot make {self.n_voters} partition voters.")
            X = X.rechunk({0: -(-n // self.n_voters)})
        if y.chunks[0] != X.chunks[0]:
            y = y.rechunk((X.chunks[0],))
        offsets = row_offsets(X.chunks[0])
        X = X.map_blocks(_checked_block, offsets, dtype=X.dtype)
        return X, y

    def _classes(self, y, dask_input):
        if dask_input:
            import dask.array as da

            seen = da.unique(y).compute()
        else:
            seen = np.unique(y)
        if self.classes is not None:
            classes = np.unique(np.asarray(self.classes))
            unknown = np.setdiff1d(seen, classes)
            if unknown.size:
                raise ValueError(f"y holds labels {unknown.tolist()} not in classes="
                                 f"{classes.tolist()}.")
        else:
            classes = seen
        if classes.size < 2:
            raise ValueError(
                f"The training labels hold one class only ({classes.tolist()}); a classifier "
                "needs at least two."
            )
        return classes

    def _fit_full(self, X, y, voters, client, report, dask_input):
        total = len(voters)
        if client is None:
            if dask_input:
                X, y = X.compute(), y.compute()
            results = []
            for i, (projector, model) in enumerate(voters):
                results.append(_train_voter(X, y, projector, model, i))
                report(len(results), total)
            return results
        if dask_input:
            # assembled on a worker from the graph: a lost copy is recomputed
            Xf, yf = client.compute([X, y])
        else:
            Xf = client.scatter(X, broadcast=True, hash=False)
            yf = client.scatter(y, broadcast=True, hash=False)
        token = _spec_token(voters, X.shape)
        futures = [
            client.submit(_train_voter, Xf, yf, projector, model, i,
                          key=f"dkrp-voter-{token}-{i}", pure=False)
            for i, (projector, model) in enumerate(voters)
        ]
        return _gather(futures, client, report, total)

    def _fit_partition(self, X, y, voters, client, report, dask_input):
        import dask
        import dask.array as da

        total = len(voters)
        if not dask_input:
            rows = -(-X.shape[0] // self.n_voters)
            if X.shape[0] < self.n_voters:
                raise ValueError(f"{X.shape[0]} rows cannot make {self.n_voters} partition "
                                 "voters.")
            X = da.from_array(X, chunks=(rows, -1), asarray=False)
            y = da.from_array(y, chunks=(rows,))
        blockwise = _blockwise_class()(voting=self.voting, classes=self.classes,
                                       voters=voters)
        self.blockwise_ = blockwise
        tasks = blockwise.fit_tasks(X, y)
        if client is None:
            results = list(dask.compute(*tasks))
            report(total, total)
            return results
        return _gather(client.compute(tasks), client, report, total)

    def _set_voters(self, results, classes, template):
        results = sorted(results, key=lambda r: r["index"])
        self.classes_ = classes
        self.n_classes_ = len(classes)
        self.template_ = template
        voters, infos = [], []
        for r in results:
            # rebuilt and checked here: a worker that regenerated other hyperplanes is refused
            projector = _spec.from_spec(r["spec"])
            class_idx = np.searchsorted(classes, r["classes"])
            voters.append(_pipeline(projector, r["model_class"], r["model_params"], r["coef"],
                                    r["intercept"], r["classes"], ))
            infos.append({k: r[k] for k in ("index", "partition", "n_rows", "n_iter",
                                            "converged", "seconds", "worker")})
            infos[-1]["solver"] = _solver_name(r["model_class"], r["model_params"])
            voters[-1].class_idx_ = class_idx
        self.estimators_ = voters
        self.voter_info_ = infos
        self._payload_cache = None

    # -- predict ---------------------------------------------------------------------
    def _payload(self):
        if getattr(self, "_payload_cache", None) is None:
            self._payload_cache = tuple(
                (_spec.spec_json(p[0]), p[-1].coef_, np.atleast_1d(p[-1].intercept_),
                 p.class_idx_.astype(np.intp))
                for p in self.estimators_
            )
        return self._payload_cache

    def _run(self, X, what):
        check_is_fitted(self, "estimators_")
        n_features = self.n_features_in_
        if is_dask_collection(X):
            from ._blockwise import row_offsets

            if X.ndim != 2:
                raise ValueError(f"Expected 2D array, got {X.ndim}D array instead.")
            if X.shape[1] != n_features:
                raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                                 f"expecting {n_features} features as input.")
            if len(X.chunks[1]) != 1:
                X = X.rechunk({1: -1})
            offsets = row_offsets(X.chunks[0])
            if what == "votes":
                chunks, drop = (X.chunks[0], (self.n_voters_,)), None
            elif what == "scores":
                chunks, drop = (X.chunks[0], (self.n_classes_,)), None
            else:
                chunks, drop = (X.chunks[0],), 1
            dtype = np.float64 if what == "scores" else np.int32 if what == "votes" \
                else np.intp
            return X.map_blocks(
                _ensemble_block, self._payload(), self.n_classes_, self.voting, what,
                n_features, offsets, dtype=dtype, chunks=chunks, drop_axis=drop,
                meta=np.empty((0,) * (1 if drop else 2), dtype=dtype),
            )
        from sklearn.utils import check_array

        X = check_array(X, accept_sparse="csr", dtype=(np.float64, np.float32),
                        ensure_all_finite=False)
        if X.shape[1] != n_features:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                             f"expecting {n_features} features as input.")
        check_finite_rows(X)
        return _ensemble_block(X, self._payload(), self.n_classes_, self.voting, what,
                               n_features)

    @property
    def n_voters_(self):
        check_is_fitted(self, "estimators_")
        return len(self.estimators_)

    def predict(self, X):
        """Majority (or soft) vote; lazy and parallel (one task per row block) for dask ``X``.

        Returns
        -------
        y : ndarray or dask array of shape (n_samples,)
        """
        idx = self._run(X, "labels")
        if is_dask_collection(idx):
            classes = self.classes_
            return idx.map_blocks(lambda i: classes[i], dtype=classes.dtype)
        return self.classes_[idx]

    def predict_voters(self, X):
        """Each voter's predicted label, shape (n_samples, n_voters) (dask for dask ``X``)."""
        idx = self._run(X, "votes")
        if is_dask_collection(idx):
            classes = self.classes_
            return idx.map_blocks(lambda i: classes[i], dtype=classes.dtype)
        return self.classes_[idx]

    def decision_function(self, X):
        """Mean over voters of their decision functions on all classes, (n_samples, n_classes).

        For a binary problem the column of ``classes_[1]`` (as scikit-learn).
        """
        scores = self._run(X, "scores")
        return scores[:, 1] if self.n_classes_ == 2 else scores

    # -- save ------------------------------------------------------------------------
    def save(self, directory, *, overwrite=False):
        """Write ``directory/dkrp.json`` and ``directory/voters.npz`` (no pickle).

        Returns
        -------
        pathlib.Path
        """
        check_is_fitted(self, "estimators_")
        return _save(self, Path(directory), overwrite=overwrite)


def _checked_block(block, offsets, block_info=None):
    i = block_info[0]["chunk-location"][0] if block_info else 0
    check_finite_rows(block, row_offset=offsets[i], partition=i)
    return block


def _spec_token(voters, shape):
    from dask.base import tokenize

    return tokenize([(p.get_params(), type(m).__name__, m.get_params()) for p, m in voters],
                    shape)


def _gather(futures, client, report, total):
    from distributed import as_completed

    results = []
    try:
        for future in as_completed(futures, loop=client.loop):
            results.append(future.result())
            report(len(results), total)
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    return results


def _solver_name(model_class, params):
    if model_class == "LinearSVC":
        return "LinearSVC(dual=True)" if params.get("dual") is True else "LinearSVC(dual=False)"
    return model_class


def _pipeline(projector, model_class, model_params, coef, intercept, classes):
    """A fitted ``Pipeline(features, svm)`` from a projector and a linear model's arrays."""
    from sklearn.pipeline import Pipeline

    model = _model_class(model_class)(**model_params)
    model.coef_ = np.asarray(coef, dtype=np.float64)
    model.intercept_ = np.asarray(intercept, dtype=np.float64)
    model.classes_ = np.asarray(classes)
    model.n_features_in_ = int(model.coef_.shape[1])
    return Pipeline([("features", projector), ("svm", model)])


# -- save / load -----------------------------------------------------------------------------


def _jsonable_params(est):
    params = est.get_params(deep=False)
    if not isinstance(params.get("method"), str):
        params["method"] = {"template": params["method"].get_params(deep=False),
                            "class": type(params["method"]).__name__}
    if not isinstance(params.get("estimator"), str):
        params["estimator"] = {"class": type(params["estimator"]).__name__,
                               "params": params["estimator"].get_params(deep=False)}
    if params.get("classes") is not None:
        params["classes"] = np.asarray(params["classes"]).tolist()
    params["random_state"] = int(est.seed_)
    return params


def _file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _save(est, directory, *, overwrite):
    from . import __version__

    if directory.exists() and not directory.is_dir():
        raise FileExistsError(f"{directory} exists and is not a directory.")
    if (directory / MANIFEST).exists() and not overwrite:
        raise FileExistsError(f"{directory} already holds a saved model; pass overwrite=True "
                              "(--overwrite) to replace it.")
    directory.mkdir(parents=True, exist_ok=True)
    classes = np.asarray(est.classes_)
    if classes.dtype.kind not in "biufU":
        raise ValueError(f"Labels of dtype {classes.dtype} cannot be saved without pickle; use "
                         "integer or string labels.")
    arrays = {"classes": classes}
    voters = []
    for i, (pipe, info) in enumerate(zip(est.estimators_, est.voter_info_, strict=True)):
        projector, model = pipe[0], pipe[-1]
        arrays[f"coef_{i}"] = model.coef_
        arrays[f"intercept_{i}"] = np.atleast_1d(model.intercept_)
        arrays[f"classes_{i}"] = np.asarray(model.classes_)
        voters.append({"projector": projector.to_spec(), "model_class": type(model).__name__,
                       "model_params": model.get_params(deep=False), "info": info})
    tmp = directory / f".{ARRAYS}.tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, directory / ARRAYS)
    manifest = {
        "format": ENSEMBLE_FORMAT,
        "format_version": ENSEMBLE_FORMAT_VERSION,
        "class": type(est).__name__,
        "params": _jsonable_params(est),
        "seed": int(est.seed_),
        "n_features_in": int(est.n_features_in_),
        "classes": classes.tolist(),
        "voters": voters,
        "arrays_file": ARRAYS,
        "arrays_sha256": _file_sha256(directory / ARRAYS),
        "fit_seconds": float(est.fit_seconds_),
        "versions": {"dkrp": __version__, "numpy": np.__version__,
                     "scikit-learn": _sklearn_version()},
    }
    text = json.dumps(manifest, indent=1, sort_keys=True, default=_json_default)
    tmp = directory / f".{MANIFEST}.tmp"
    tmp.write_text(text)
    os.replace(tmp, directory / MANIFEST)
    return directory


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _sklearn_version():
    import sklearn

    return sklearn.__version__


def load_ensemble(manifest: dict, directory: Path):
    """Rebuild a saved :class:`RandomFeatureVotingClassifier` (called by :func:`dkrp.load`)."""
    if manifest.get("format_version") != ENSEMBLE_FORMAT_VERSION:
        raise SpecError(f"Unsupported ensemble format_version "
                        f"{manifest.get('format_version')!r}; this dkrp reads "
                        f"{ENSEMBLE_FORMAT_VERSION}.")
    try:
        npz_path = directory / manifest["arrays_file"]
        expected = manifest["arrays_sha256"]
        voters = manifest["voters"]
        params = dict(manifest["params"])
        classes_json = manifest["classes"]
        n_features = int(manifest["n_features_in"])
        seed = int(manifest["seed"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecError(f"{directory / MANIFEST} is not a complete ensemble manifest "
                        f"({type(exc).__name__}: {exc}).") from exc
    if Path(manifest["arrays_file"]).name != manifest["arrays_file"]:
        raise SpecError(f"arrays_file {manifest['arrays_file']!r} must be a file name in "
                        f"{directory}.")
    if not npz_path.is_file():
        raise FileNotFoundError(f"The ensemble's arrays file {npz_path} is missing.")
    actual = _file_sha256(npz_path)
    if actual != expected:
        raise SpecError(
            f"{npz_path} does not match the SHA-256 recorded in {MANIFEST} (recorded "
            f"{str(expected)[:12]}…, file {actual[:12]}…): the file was modified or "
            "truncated. Refused; restore it or retrain."
        )
    try:
        with open(npz_path, "rb") as fh, np.load(fh, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except ValueError as exc:  # object arrays need pickle: refuse them
        raise SpecError(f"{npz_path} holds arrays that would need pickle: refused.") from exc
    except Exception as exc:  # noqa: BLE001 - a corrupt zip/npy
        raise SpecError(f"{npz_path} is not a readable .npz ({type(exc).__name__}: {exc}): "
                        "refused.") from exc
    classes = arrays.get("classes")
    if classes is None or classes.tolist() != classes_json:
        raise SpecError(f"{npz_path} and {MANIFEST} disagree on the classes.")
    method = params.get("method")
    if isinstance(method, dict):
        from ._spec import registered_projectors

        cls = registered_projectors().get(method.get("class"))
        if cls is None:
            raise SpecError(f"Unknown projector class {method.get('class')!r}.")
        params["method"] = cls(**method["template"])
    estimator = params.get("estimator")
    if isinstance(estimator, dict):
        params["estimator"] = _model_class(estimator["class"])(**estimator["params"])
    est = RandomFeatureVotingClassifier(**params)
    results = []
    for i, v in enumerate(voters):
        try:
            coef, intercept = arrays[f"coef_{i}"], arrays[f"intercept_{i}"]
            vclasses = arrays[f"classes_{i}"]
        except KeyError as exc:
            raise SpecError(f"{npz_path} lacks the arrays of voter {i} ({exc}).") from exc
        if coef.ndim != 2 or coef.dtype.kind != "f" or intercept.shape != (coef.shape[0],):
            raise SpecError(f"Voter {i}'s arrays in {npz_path} have the wrong shapes.")
        results.append({"index": i, "spec": v["projector"], "model_class": v["model_class"],
                        "model_params": v["model_params"], "coef": coef,
                        "intercept": intercept, "classes": vclasses,
                        **{k: v["info"].get(k) for k in ("partition", "n_rows", "n_iter",
                                                         "converged", "seconds", "worker")}})
    est.n_features_in_ = n_features
    est.seed_ = seed
    est._set_voters(results, classes, None)
    for pipe in est.estimators_:
        if pipe[0].n_features_in_ != n_features or pipe[-1].coef_.shape[1] != \
                pipe[0]._n_features_out:
            raise SpecError(f"A voter in {directory} does not fit its feature counts.")
    est.fit_seconds_ = float(manifest.get("fit_seconds", float("nan")))
    return est


_spec.register_format(ENSEMBLE_FORMAT, load_ensemble, MANIFEST)


def evaluate(model, X, y=None, *, client=None):
    """Predict ``X`` once and score the ensemble and each voter (the CLI's summary table).

    The voters' labels are computed in one pass (lazy and parallel for dask ``X``,
    on ``client`` when given); the hard vote is taken from them, the soft vote
    needs the decision functions as well.

    Returns
    -------
    dict
        ``y_pred``, ``votes`` (n_samples, n_voters), ``seconds``, and when ``y`` is
        given ``accuracy``, ``macro_f1`` and ``voter_accuracy`` (one per voter).
    """
    from sklearn.metrics import accuracy_score, f1_score

    t0 = time.perf_counter()
    parts = [model.predict_voters(X)]
    if model.voting == "soft":
        parts.append(model.predict(X))
    if y is not None and is_dask_collection(y):
        parts.append(y)
    if any(is_dask_collection(p) for p in parts):
        if client is not None:
            parts = client.gather(client.compute(parts))
        else:
            import dask

            parts = list(dask.compute(*parts))
    votes = np.asarray(parts[0])
    if model.voting == "soft":
        y_pred = np.asarray(parts[1])
    else:
        y_pred = model.classes_[hard_vote(np.searchsorted(model.classes_, votes),
                                          model.n_classes_)]
    if y is not None:
        y = np.asarray(parts[-1] if is_dask_collection(y) else y)
    out = {"y_pred": y_pred, "votes": votes, "seconds": time.perf_counter() - t0}
    if y is not None:
        if y.shape[0] != y_pred.shape[0]:
            raise ValueError("Found input variables with inconsistent numbers of samples: "
                             f"[{y_pred.shape[0]}, {y.shape[0]}]")
        out["accuracy"] = float(accuracy_score(y, y_pred))
        out["macro_f1"] = float(f1_score(y, y_pred, average="macro"))
        out["voter_accuracy"] = [float((votes[:, j] == y).mean())
                                 for j in range(votes.shape[1])]
    return out


def summary_lines(model, evaluation=None):
    """The summary table: per voter its training time, solver and (with labels) accuracy."""
    has_acc = evaluation is not None and "voter_accuracy" in evaluation
    head = f"{'voter':>5} {'partition':>9} {'rows':>9} {'solver':<22} {'iter':>5} {'train s':>8}"
    if has_acc:
        head += f" {'accuracy':>8}"
    lines = [head, "-" * len(head)]
    for j, info in enumerate(model.voter_info_):
        part = "-" if info.get("partition") is None else str(info["partition"])
        line = (f"{j:>5} {part:>9} {info.get('n_rows') or 0:>9} {info.get('solver', ''):<22} "
                f"{info.get('n_iter') or 0:>5} {info.get('seconds') or 0:>8.2f}")
        if info.get("converged") is False:
            line += " (not converged)"
        if has_acc:
            line += f" {evaluation['voter_accuracy'][j]:>8.4f}"
        lines.append(line)
    lines.append("-" * len(head))
    fit_s = getattr(model, "fit_seconds_", float("nan"))
    line = f"{'vote':>5} {model.voting:>9} {'':>9} {'':<22} {'':>5} {fit_s:>8.2f}"
    if has_acc:
        line += f" {evaluation['accuracy']:>8.4f}"
    lines.append(line)
    if has_acc:
        acc = np.asarray(evaluation["voter_accuracy"])
        lines.append(f"ensemble accuracy {evaluation['accuracy']:.4f}, macro-F1 "
                     f"{evaluation['macro_f1']:.4f}; voters mean {acc.mean():.4f} (min "
                     f"{acc.min():.4f}, max {acc.max():.4f}); "
                     f"predict {evaluation['seconds']:.1f} s")
    return lines
