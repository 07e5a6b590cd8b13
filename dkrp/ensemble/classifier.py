"""The estimator: :class:`RandomFeatureVotingClassifier`.

Owns the scikit-learn API (parameters and their checks, ``fit``, ``predict``,
``predict_voters``, ``decision_function``, ``save``): it checks the input, draws
the voters' seeds, hands them to a strategy of :mod:`dkrp.ensemble.training`,
rebuilds the fitted voters from their specs and arrays, and votes lazily (one task
per row block) on dask input. The vote itself and its tie rule are in
:mod:`dkrp.ensemble.voters`; the file format in :mod:`dkrp.ensemble.persistence`.
"""

from __future__ import annotations

import numbers
import time
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from .._blockwise import current_client
from .._random import resolve_seed
from .._spec import from_spec, spec_json
from .._validation import (
    check_choice,
    check_finite_rows,
    check_integer,
    is_dask_collection,
    sklearn_checks,
)
from ..errors import InvalidInputError
from .persistence import register_estimator, save_ensemble
from .training import (
    TrainingRun,
    checked_block,
    fit_full,
    fit_partition,
    partition_sizes,
    progress_callback,
)
from .voters import (
    LINEAR_MODELS,
    SOLVERS,
    ensemble_block,
    make_model,
    solver_name,
    voter_pipeline,
    voter_seeds,
)

_STRATEGIES = ("full", "partition")
_VOTING = ("hard", "soft")


@register_estimator
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
    estimator : {"auto", "newton", "primal", "dual", "sgd"} or classifier, default="auto"
        The linear model: :class:`dkrp.PrimalLinearSVC` (float32 products),
        ``LinearSVC(dual=False)``, ``LinearSVC(dual=True)``, averaged
        ``SGDClassifier(loss="hinge")``; ``"auto"`` is :data:`~dkrp.ensemble.AUTO_SOLVER`
        (``"newton"``, the fastest at every size measured: see :mod:`dkrp.ensemble`); or
        an instance of ``LinearSVC``, ``LogisticRegression``, ``SGDClassifier``,
        ``Perceptron``, ``PassiveAggressiveClassifier`` or :class:`dkrp.PrimalLinearSVC`
        (cloned; ``C`` is not applied to it): a voter is saved and rebuilt from its
        ``coef_``, ``intercept_`` and ``classes_`` alone, so other classes are refused.
    voting : {"hard", "soft"}, default="hard"
        Majority vote of labels (ties to the lowest label) or the mean decision
        function, each class's over the voters that saw it.
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
            check_choice("estimator", self.estimator, SOLVERS)
        elif type(self.estimator).__name__ not in LINEAR_MODELS:
            # refused before any work: a voter keeps only its linear model's arrays and is
            # rebuilt as one of these, so another class would fail after training them all
            raise InvalidInputError(
                f"estimator must be one of {SOLVERS} or an instance of one of "
                f"{', '.join(LINEAR_MODELS)} (a voter is saved and rebuilt from its coef_, "
                f"intercept_ and classes_ alone), got {self.estimator!r}.")
        # numbers.Real: a C from a numpy grid (GridSearchCV over np.arange or np.logspace
        # hands out numpy scalars) is a number too; a bool is not
        if (isinstance(self.C, bool) or not isinstance(self.C, numbers.Real)
                or not (np.isfinite(self.C) and self.C > 0)):
            raise InvalidInputError(f"C must be a positive number, got {self.C!r}.")

    def _template(self):
        from ..base import BaseProjector
        from ..methods import METHODS, make_projector

        if isinstance(self.method, BaseProjector):
            projector = clone(self.method)
            if self.n_components is not None:
                projector.set_params(n_components=self.n_components)
            if self.gamma is not None:
                projector.set_params(gamma=self.gamma)
            return projector
        if not isinstance(self.method, str):
            raise InvalidInputError(f"method must be a --method name or a dkrp projector, got "
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
    def fit(self, X, y, *, client=None, progress=False, retries=0, checkpoint=None):
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
        retries : int, default=0
            Run a voter's task up to ``retries`` more times when it raises (a transient
            I/O error, say). Workers that die are handled by Dask itself
            (``distributed.scheduler.allowed-failures``).
        checkpoint : str or path-like, optional
            A directory where each voter is kept as it finishes
            (:mod:`dkrp.ensemble.checkpoint`; created). The same fit again trains only
            the voters not kept there and gives the model an uninterrupted fit gives;
            a checkpoint of another job (other parameters or data) is refused. When a
            voter fails, the others are finished and kept first. Not removed: call
            ``Checkpoint.remove`` (:mod:`dkrp.ensemble.checkpoint`) once the model is
            saved.

        Returns
        -------
        self

        Raises
        ------
        dkrp.errors.VoterError
            A voter's task failed on its last attempt (or killed its workers).
        """
        check_integer("retries", retries, minimum=0)
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
            from ..kernels import scale_gamma

            template.set_params(gamma=float(scale_gamma(X, getattr(template, "kernel",
                                                                     "gaussian"))))
        self.seed_ = resolve_seed(self.random_state)
        n_rows = int(X.shape[0])
        if self.strategy == "partition":
            n_rows = -(-n_rows // self.n_voters)
        voters = self._voters(self.seed_, template, n_rows)
        kept, run = {}, TrainingRun(todo=list(range(self.n_voters)), retries=int(retries))
        if checkpoint is not None:
            store = self._checkpoint(checkpoint, template, X, y, classes)
            kept = store.finished()
            run = TrainingRun(todo=[i for i in run.todo if i not in kept], retries=run.retries,
                              on_result=store.keep, kept=str(checkpoint), done=len(kept))
        if client is None:
            client = current_client()
        report, bar = progress_callback(progress, self.n_voters)
        try:
            if run.done:
                report(run.done, self.n_voters)
            if self.strategy == "full":
                results = fit_full(X, y, voters, client, report, dask_input, run)
            else:
                results, self.blockwise_ = fit_partition(
                    X, y, voters, client, report, dask_input, run, voting=self.voting,
                    classes=self.classes)
        finally:
            if bar is not None:
                bar.close()
        self._set_voters([*kept.values(), *results], classes)
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def _checkpoint(self, directory, template, X, y, classes):
        from .checkpoint import Checkpoint, data_identity, storable_classes
        from .persistence import jsonable_params

        storable_classes(classes)  # refused before any work, not as the first voter ends

        job = {"params": jsonable_params(self), "template": template.get_params(deep=False),
               "template_class": type(template).__name__, "data": data_identity(X, y),
               "classes": np.asarray(classes).tolist()}
        return Checkpoint.open(directory, job)

    def _check_xy(self, X, y):
        from sklearn.utils import check_array, check_consistent_length, column_or_1d

        with sklearn_checks():
            X = check_array(X, accept_sparse="csr", dtype=(np.float64, np.float32),
                            ensure_all_finite=False)
            y = column_or_1d(y, warn=True)
            check_consistent_length(X, y)
        check_finite_rows(X)
        return X, y

    def _check_dask_xy(self, X, y):
        from .._blockwise import row_offsets

        if X.ndim != 2:
            raise InvalidInputError(f"Expected 2D array, got {X.ndim}D array instead.")
        if not is_dask_collection(y):
            import dask.array as da

            y = da.from_array(np.asarray(y), chunks=(X.chunks[0],))
        if y.ndim != 1:
            raise InvalidInputError(
                f"y should be a 1d array, got an array of shape {y.shape} instead."
            )
        if np.isnan(X.shape[0]) or any(np.isnan(c) for c in X.chunks[0]):
            raise InvalidInputError(
                "X has unknown chunk sizes; call X.compute_chunk_sizes() first."
            )
        if X.shape[0] != y.shape[0]:
            raise InvalidInputError("Found input variables with inconsistent numbers of samples: "
                                    f"[{X.shape[0]}, {y.shape[0]}]")
        if X.dtype.kind not in "biuf":
            raise InvalidInputError(f"dask array X must be numeric, got dtype {X.dtype}.")
        if len(X.chunks[1]) != 1:
            X = X.rechunk({1: -1})
        if self.strategy == "partition" and len(X.chunks[0]) != self.n_voters:
            # the blocks numpy input is split into (9 rows, 4 voters: 3, 2, 2, 2): blocks of
            # ceil(n / n_voters) rows made 3 blocks of 9 rows, or a last block of 1 of 10
            X = X.rechunk({0: partition_sizes(int(X.shape[0]), self.n_voters)})
        if y.chunks[0] != X.chunks[0]:
            y = y.rechunk((X.chunks[0],))
        offsets = row_offsets(X.chunks[0])
        X = X.map_blocks(checked_block, offsets, dtype=X.dtype)
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
                raise InvalidInputError(f"y holds labels {unknown.tolist()} not in classes="
                                        f"{classes.tolist()}.")
        else:
            classes = seen
        if classes.size < 2:
            raise InvalidInputError(
                f"The training labels hold one class only ({classes.tolist()}); a classifier "
                "needs at least two."
            )
        return classes

    def _set_voters(self, results, classes):
        results = sorted(results, key=lambda r: r["index"])
        self.classes_ = classes
        self.n_classes_ = len(classes)
        voters, infos = [], []
        for r in results:
            # rebuilt and checked here: a worker that regenerated other hyperplanes is refused
            projector = from_spec(r["spec"])
            class_idx = np.searchsorted(classes, r["classes"])
            voters.append(voter_pipeline(projector, r["model_class"], r["model_params"], r["coef"],
                                         r["intercept"], r["classes"], ))
            infos.append({k: r[k] for k in ("index", "partition", "n_rows", "n_iter",
                                            "converged", "seconds", "worker")})
            infos[-1]["solver"] = solver_name(r["model_class"], r["model_params"])
            voters[-1].class_idx_ = class_idx
        self.estimators_ = voters
        self.voter_info_ = infos
        self._payload_cache = None

    # -- predict ---------------------------------------------------------------------
    def _payload(self):
        if getattr(self, "_payload_cache", None) is None:
            self._payload_cache = tuple(
                (spec_json(p[0]), p[-1].coef_, np.atleast_1d(p[-1].intercept_),
                 p.class_idx_.astype(np.intp))
                for p in self.estimators_
            )
        return self._payload_cache

    def _run(self, X, what):
        check_is_fitted(self, "estimators_")
        n_features = self.n_features_in_
        if is_dask_collection(X):
            from .._blockwise import row_offsets

            if X.ndim != 2:
                raise InvalidInputError(
                    f"Expected 2D array, got {X.ndim}D array instead.")
            if X.shape[1] != n_features:
                raise InvalidInputError(
                    f"X has {X.shape[1]} features, but {type(self).__name__} is "
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
                ensemble_block, self._payload(), self.n_classes_, self.voting, what,
                n_features, offsets, dtype=dtype, chunks=chunks, drop_axis=drop,
                meta=np.empty((0,) * (1 if drop else 2), dtype=dtype),
            )
        from sklearn.utils import check_array

        with sklearn_checks():
            X = check_array(X, accept_sparse="csr", dtype=(np.float64, np.float32),
                            ensure_all_finite=False)
        if X.shape[1] != n_features:
            raise InvalidInputError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                                    f"expecting {n_features} features as input.")
        check_finite_rows(X)
        return ensemble_block(X, self._payload(), self.n_classes_, self.voting, what,
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
        """Mean decision function of each class over the voters that saw it, (n_samples, n_classes).

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
        return save_ensemble(self, Path(directory), overwrite=overwrite)
