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

Training strategies (on the given or the default client's cluster, else in this process)
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
    :class:`dkrp.PrimalLinearSVC` (``"newton"``, :data:`AUTO_SOLVER`): ``LinearSVC``'s
    squared-hinge problem solved in the primal by Newton-CG with BLAS products, on the
    voter's features rounded to float32 (1.4 to 1.7 times faster than float64, the same
    test accuracy in 6 of 6 fits of 20,000 and 40,000 rows). It was the fastest solver in
    every cell of ``benchmarks/bench_voter_solvers.py`` (RESULTS.md: one thread, pooled
    MNIST, 2,000 to 300,000 rows by 500 and 2,000 RFF, C = 1): 3 to 8 times faster than
    liblinear's dual (``"dual"``, the rule before issue 33) at 500 RFF, 2 to 4 times at
    2,000, with the same objective to its tolerance, and 3 to 10 times faster than
    averaged SGD (``"sgd"``, ``SGDClassifier(loss="hinge", average=True)``), which before
    issue 33 took over from 100,000 rows on an extrapolation. ``"primal"``
    (``LinearSVC(dual=False)``, liblinear's trust-region Newton without BLAS) took 26.3 s
    where the dual took 12.5 s and ``PrimalLinearSVC`` 2.1 s on one 20,000-row voter.
    A voter's features are dense (every dkrp map's are), as ``PrimalLinearSVC`` needs.

    liblinear draws from one process-wide generator, so liblinear fits in
    threads of one process take turns (a lock): run voters in worker
    processes (dkrp's clusters have one thread per worker) for parallelism.

Voting
    ``"hard"``: each voter predicts a label, the most frequent label wins; ties
    go to the lowest class label (the first of ``classes_``), as in
    scikit-learn's ``VotingClassifier`` (``argmax`` of a ``bincount``).
    ``"soft"``: the voters' decision functions are averaged and the largest
    mean wins; each class over the voters that saw it (a partition voter has no
    score for a class its row block lacks: :func:`dkrp.ensemble.voters.soft_scores`).

Saving
    :meth:`RandomFeatureVotingClassifier.save` writes a directory holding
    ``dkrp.json`` (parameters, each voter's projector spec and linear model,
    classes, versions, the SHA-256 of the arrays file) and ``voters.npz``
    (``coef_``, ``intercept_``); :func:`dkrp.load` reads it back with
    ``np.load(..., allow_pickle=False)`` after checking the SHA-256, so a
    tampered or truncated file is refused before anything in it is read.

Modules
    :mod:`~dkrp.ensemble.classifier`
        :class:`RandomFeatureVotingClassifier`: parameters, fit, predict, save.
    :mod:`~dkrp.ensemble.voters`
        one voter (seeds, linear model, training task) and the vote.
    :mod:`~dkrp.ensemble.training`
        the ``"full"`` and ``"partition"`` strategies on a cluster, retries, and the
        :class:`~dkrp.errors.VoterError` of a voter that failed.
    :mod:`~dkrp.ensemble.checkpoint`
        each finished voter kept (``fit(checkpoint=...)``), so a rerun resumes.
    :mod:`~dkrp.ensemble.persistence`
        save/load without pickle (``dkrp.load`` reads a model directory).
    :mod:`~dkrp.ensemble.scoring`
        :func:`evaluate`, :func:`summary_lines` and the warning on test labels the model
        never saw.
"""

from __future__ import annotations

from .classifier import RandomFeatureVotingClassifier
from .persistence import ARRAYS as ARRAYS
from .persistence import ENSEMBLE_FORMAT, load_ensemble
from .persistence import ENSEMBLE_FORMAT_VERSION as ENSEMBLE_FORMAT_VERSION
from .persistence import MANIFEST as MANIFEST
from .scoring import evaluate as evaluate
from .scoring import summary_lines as summary_lines
from .scoring import unseen_classes_warning as unseen_classes_warning
from .voters import AUTO_SOLVER, VOTER_STREAM, voter_seeds
from .voters import hard_vote as hard_vote
from .voters import make_model as make_model


def __getattr__(name):
    from .voters import removed_name

    return removed_name(__name__, name)


__all__ = [
    "AUTO_SOLVER",
    "ENSEMBLE_FORMAT",
    "RandomFeatureVotingClassifier",
    "VOTER_STREAM",
    "load_ensemble",
    "voter_seeds",
]
