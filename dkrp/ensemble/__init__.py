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
    rows. ``results/legacy/ensemble/solvers.csv`` holds the three measured at
    5,000 rows (by the thesis script that ``dkrp experiment ensemble`` replaced).

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
from .voters import SGD_MIN_SAMPLES, VOTER_STREAM, voter_seeds
from .voters import hard_vote as hard_vote
from .voters import make_model as make_model

__all__ = [
    "ENSEMBLE_FORMAT",
    "RandomFeatureVotingClassifier",
    "SGD_MIN_SAMPLES",
    "VOTER_STREAM",
    "load_ensemble",
    "voter_seeds",
]
