"""The training strategies of the ensemble on a Dask cluster.

``"full"`` (:func:`fit_full`): every voter sees all rows, one task per voter.
``"partition"`` (:func:`fit_partition`): one voter per row block through dask-ml's
``BlockwiseVotingClassifier``, subclassed so every block gets its own seeds. Both
run on a ``distributed.Client`` when given (or the default client), in this process
otherwise; this module also owns the progress callback, the gathering of voter
futures (each result handed on as it arrives; on a voter's final failure the others
are cancelled, or waited for when the finished voters are kept), the retries of a
voter's task, the :class:`~dkrp.errors.VoterError` naming a failed voter, and the
finite-rows check of dask input.
See :mod:`dkrp.ensemble` for the data movement of each strategy.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from .._validation import check_finite_rows
from ..errors import InvalidInputError, Message, Param, PartitionInputError, VoterError
from .voters import train_voter

logger = logging.getLogger(__name__)


def _blockwise_class():
    from dask_ml.ensemble import BlockwiseVotingClassifier

    class SeededBlockwiseVotingClassifier(BlockwiseVotingClassifier):
        """dask-ml's blockwise voter, one seed per block (see :mod:`dkrp.ensemble`).

        ``voters`` is a list of ``(projector, model)`` with their own seeds, one per
        row block; ``fit`` returns the futures (or results) of :func:`train_voter`.
        """

        def __init__(self, estimator=None, voting="hard", classes=None, voters=None,
                     retries=0):
            super().__init__(estimator, voting=voting, classes=classes)
            self.voters = voters
            self.retries = retries

        def fit_tasks(self, X, y):
            import dask

            from .._blockwise import row_offsets

            Xs = X.to_delayed().flatten()
            ys = y.to_delayed().flatten()
            if len(Xs) != len(ys):
                raise InvalidInputError(
                    f"The number of blocks in X and y must match. {len(Xs)} != {len(ys)}")
            if len(Xs) != len(self.voters):
                raise InvalidInputError(
                    f"{len(Xs)} row blocks for {len(self.voters)} voters: the partition "
                    "strategy trains voter i on row block i. Set n_voters to the number "
                    f"of row blocks ({len(Xs)}), or rechunk X (and y) to {len(self.voters)} "
                    "row blocks.")
            offsets = row_offsets(X.chunks[0])
            train = dask.delayed(_train_voter_retrying, pure=True)
            # a key names the block's rows, its labels and the voter: fits of other
            # parameters (a search's C grid) or labels on the same rows, at once on one
            # client, must not be handed each other's voters
            return [
                train(Xb, yb, proj, model, i, partition=i, row_offset=offsets[i],
                      retries=self.retries, dask_key_name="dkrp-voter-" + dask.base.tokenize(
                          Xb.key, yb.key, i, _spec_token([(proj, model)], None)))
                for i, (Xb, yb, (proj, model)) in enumerate(zip(Xs, ys, self.voters, strict=True))
            ]

    return SeededBlockwiseVotingClassifier


def progress_callback(progress, total):
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


@dataclass
class TrainingRun:
    """What one ``fit`` trains and what it does with each voter it finishes.

    Attributes
    ----------
    todo : list of int
        The voters to train (those an earlier run kept are not).
    retries : int
        Extra attempts of a voter's task that raises (``Client.compute(retries=)`` on a
        cluster, a loop in the task here).
    on_result : callable
        Called with each voter's result as it arrives (in this process): keeps it.
    kept : str or None
        Where the finished voters are kept (named when a voter fails); None: nowhere,
        so the first failure cancels the other voters.
    done : int
        Voters an earlier run finished (the progress starts there).
    """

    todo: list
    retries: int = 0
    on_result: Callable = field(default=lambda result: None)
    kept: str | None = None
    done: int = 0


def fit_full(X, y, voters, client, report, dask_input, run):
    """Strategy ``"full"``: every voter trains on all rows, one task each.

    ``X`` reaches each worker once (scattered with ``broadcast=True``, or assembled on
    a worker from its graph); without a client the voters train here in turn.
    Returns the :func:`train_voter` results of the voters of ``run.todo``.
    """
    total = len(voters)
    if not run.todo:
        return []
    if client is None:
        if dask_input:
            X, y = X.compute(), y.compute()
        with _local_pool(len(run.todo)) as submit:
            futures = {submit(_train_voter_retrying, X, y, *voters[i], i,
                              retries=run.retries): i for i in run.todo}
            return _collect_local(futures, run, report, total, lambda i: None)
    if dask_input:
        # assembled on a worker from the graph: a lost copy is recomputed
        Xf, yf = client.compute([X, y])
    else:
        Xf = client.scatter(X, broadcast=True, hash=False)
        yf = client.scatter(y, broadcast=True, hash=False)
    # the data's futures name the data: two fits of one spec on other rows of one shape
    # (the folds of a search running at once on one client) must not share a key
    token = _spec_token(voters, X.shape, Xf.key, yf.key)
    futures = {
        client.submit(train_voter, Xf, yf, *voters[i], i, key=f"dkrp-voter-{token}-{i}",
                      pure=False, retries=run.retries): i
        for i in run.todo
    }
    return _gather(futures, client, run, report, total, lambda i: None)


def fit_partition(X, y, voters, client, report, dask_input, run, *, voting, classes):
    """Strategy ``"partition"``: voter ``i`` trains on row block ``i``, where it lives.

    Through dask-ml's blockwise voter (:func:`_blockwise_class`). Returns the
    :func:`train_voter` results of the voters of ``run.todo`` and the blockwise
    estimator.
    """
    import dask
    import dask.array as da

    from .._blockwise import row_offsets

    total = n_voters = len(voters)
    if not dask_input:
        sizes = partition_sizes(X.shape[0], n_voters)
        _check_partition_classes(y, sizes)
        X = da.from_array(X, chunks=(sizes, -1), asarray=False)
        y = da.from_array(y, chunks=(sizes,))
    blockwise = _blockwise_class()(voting=voting, classes=classes, voters=voters,
                                   retries=0 if client is not None else run.retries)
    tasks = blockwise.fit_tasks(X, y)
    offsets = row_offsets(X.chunks[0])

    def where(i):
        return f"partition {i}, rows {offsets[i]}..{offsets[i] + X.chunks[0][i] - 1}"

    if client is None:
        with _local_pool(len(run.todo)) as submit:
            futures = {submit(dask.compute, tasks[i], scheduler="sync"): i
                       for i in run.todo}
            return _collect_local(futures, run, report, total, where,
                                  unpack=lambda r: r[0]), blockwise
    futures = dict(zip(client.compute([tasks[i] for i in run.todo], retries=run.retries),
                       run.todo, strict=True))
    return _gather(futures, client, run, report, total, where), blockwise


def partition_sizes(n_rows: int, n_voters: int) -> tuple:
    """Rows of each of ``n_voters`` consecutive row blocks: as equal as can be, the
    first ``n_rows % n_voters`` one row longer (9 rows, 4 voters: 3, 2, 2, 2).

    Examples
    --------
    >>> partition_sizes(9, 4)
    (3, 2, 2, 2)
    """
    if n_rows < n_voters:
        raise InvalidInputError(Message(
            "{} rows cannot make {} partition voters (one row block each): use {} or fewer, "
            "or {}.", n_rows, n_voters, Param("n_voters", n_rows), Param("strategy", "full")))
    base, extra = divmod(int(n_rows), int(n_voters))
    return tuple(base + (i < extra) for i in range(n_voters))


def _check_partition_classes(y, sizes):
    """Refuse, before any work, a row block with one class only (its voter cannot learn)."""
    import numpy as np

    y = np.asarray(y)
    start = 0
    for i, n in enumerate(sizes):
        labels = np.unique(y[start:start + n])
        if labels.size < 2:
            raise InvalidInputError(Message(
                "Row block {} (rows {}..{}) holds one class only ({!r}): its partition voter "
                "cannot learn a classifier. Shuffle the rows, use fewer voters (larger "
                "blocks), or {}.", i, start, start + n - 1, labels[0].item(),
                Param("strategy", "full")))
        start += n


def checked_block(block, offsets, block_info=None):
    i = block_info[0]["chunk-location"][0] if block_info else 0
    check_finite_rows(block, row_offset=offsets[i], partition=i)
    return block


def _spec_token(voters, shape, *data):
    """A token of the voters' maps and models, the input's shape and ``data`` (keys)."""
    from dask.base import tokenize

    return tokenize([(p.get_params(), type(m).__name__, m.get_params()) for p, m in voters],
                    shape, *data)


def _gather(futures, client, run, report, total, where):
    """The results of the voters' distributed ``futures`` (future -> voter index)."""
    from distributed import as_completed

    from ..feature_store.tasks import attempts_allowed

    def cancel():
        client.cancel(list(futures))

    # loop=: the client need not be the default one
    return _collect(as_completed(list(futures), loop=client.loop), futures, run, report,
                    total, where, cancel, lambda exc: attempts_allowed(exc, run.retries, client),
                    release=lambda future: future.release())


@contextlib.contextmanager
def _local_pool(n_voters):
    """``submit(fn, *args, **kwargs)`` of ``n_voters`` voters trained in this process (no
    client): as many at once as there are CPUs, each with its share of them, as on workers.

    A voter's model then fits with BLAS on one thread (:func:`train_voter`), so voters
    trained in turn would leave all but one core idle; and one voter's multi-threaded
    BLAS on small products is 10-15x slower on a busy machine (issue 33's follow-up).
    """
    from .._resources import available_cpus
    from .._threading import limit_threads

    at_once = max(1, min(available_cpus(), n_voters))
    share = max(1, available_cpus() // at_once)
    with ThreadPoolExecutor(at_once) as pool:
        def with_share(fn, *args, **kwargs):
            with limit_threads(share):
                return fn(*args, **kwargs)

        yield lambda fn, *args, **kwargs: pool.submit(with_share, fn, *args, **kwargs)


def _collect_local(futures, run, report, total, where, unpack=lambda r: r):
    """The results of the voters' ``concurrent.futures`` (future -> voter index)."""
    from concurrent.futures import as_completed

    def cancel():
        for future in futures:
            future.cancel()

    return _collect(as_completed(list(futures)), futures, run, report, total, where, cancel,
                    lambda exc: run.retries + 1, unpack)


def _collect(completed, futures, run, report, total, where, cancel, attempts,
             unpack=lambda r: r, release=lambda future: None):
    """Each result as it arrives: kept (``run.on_result``) and counted.

    A voter's final failure is raised as a :class:`VoterError` (bad input as it is).
    Where finished voters are kept (``run.kept``), the other voters are waited for
    first, so that a rerun has as few to train as can be; otherwise they are cancelled.
    """
    results, failed = [], None
    try:
        for future in completed:
            i = futures[future]
            try:
                result = unpack(future.result())
                # here now: released, a worker's death does not make the cluster train it again
                release(future)
            except Exception as exc:  # noqa: BLE001 - re-raised, naming the voter
                if _bad_input(exc):
                    raise
                if run.kept is None:
                    raise _voter_failure(exc, i, attempts(exc), where(i), run, None) from exc
                if failed is None:
                    failed = (exc, i, attempts(exc))
                continue
            run.on_result(result)
            results.append(result)
            report(run.done + len(results), total)
    except BaseException:
        cancel()
        raise
    if failed is not None:
        exc, i, n = failed
        raise _voter_failure(exc, i, n, where(i), run, run.done + len(results)) from exc
    return results


def _bad_input(exc) -> bool:
    """Whether ``exc`` says already what is wrong with the input (retrying cannot help):
    a partition's NaN or shape, or a :class:`Message` of :func:`train_voter`."""
    return isinstance(exc, PartitionInputError) or (
        isinstance(exc, ValueError) and len(exc.args) == 1 and isinstance(exc.args[0], Message))


def _train_voter_retrying(X, y, projector, model, index, partition=None, row_offset=0,
                          retries=0):
    """:func:`train_voter` with ``retries`` in-task retries (dask's local scheduler has
    none of its own); bad input (:func:`_bad_input`) is not retried."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return train_voter(X, y, projector, model, index, partition=partition,
                               row_offset=row_offset)
        except Exception as exc:
            if _bad_input(exc) or attempt > retries:
                raise
            logger.warning("voter %d failed (attempt %d of %d), retrying: %r", index,
                           attempt, retries + 1, exc)


def _voter_failure(exc, index, attempts, where, run, n_kept):
    """The :class:`VoterError` of voter ``index``'s final failure ``exc``.

    ``n_kept``: the voters kept in ``run.kept`` (None: nothing is kept).
    """
    from distributed.scheduler import KilledWorker

    who = f"Voter {index}" + (f" ({where})" if where else "")
    killed = isinstance(exc, KilledWorker)
    if killed:
        what = (f"{who} killed its worker {attempts} times (each worker running it died; "
                "distributed.scheduler.allowed-failures)")
    else:
        what = (f"{who} failed after {attempts} {'attempt' if attempts == 1 else 'attempts'}"
                f": {type(exc).__name__}: {exc}")
    hint = Message(" (or pass {} if the error is transient)", Param("retries", metavar="N")) \
        if attempts == 1 and not killed else ""
    if n_kept is None:
        message = Message("{}{}.", what, hint)
    else:
        again = Message("{} again", Param("checkpoint", run.kept),
                        cli="run the same command again", python=(
                            f"fit again with checkpoint={run.kept!r}"))
        message = Message("{}; {} finished voter(s) are kept in {}: fix the cause and {} to "
                          "train the missing ones{}.", what, n_kept, run.kept, again, hint)
    return VoterError(message, voter=index, attempts=attempts)


def time_one_voter(model, X, y, *, max_rows=1000) -> dict | None:
    """Train voter 0 of ``model`` on the first rows of ``X``, on one core: a calibration.

    Nothing of ``model`` is changed. The voter is what ``model.fit`` would train (its
    map, seeds and linear model; the solver chosen for the rows each voter really
    sees), on at most ``max_rows`` rows, twice (the faster counts); ``gamma="scale"``
    is taken from the sample.
    The time per voter is that measurement scaled linearly to the rows each voter
    sees: an estimate (the dual solver grows faster than linearly with the rows).

    Parameters
    ----------
    model : RandomFeatureVotingClassifier
        Not fitted (its parameters are read, never set).
    X : array-like, sparse matrix or dask array of shape (n_samples, n_features)
    y : array-like or dask array of shape (n_samples,)
    max_rows : int, default=1000

    Returns
    -------
    dict or None
        ``seconds`` (one voter, estimated), ``measured`` (seconds on the sample),
        ``sample_rows``, ``rows_per_voter`` and ``solver``; None when the sample cannot
        train a voter (one class in the first rows, say: ``fit`` itself says what is
        wrong, if anything is).
    """
    import logging
    import time

    import numpy as np
    from sklearn.base import clone

    from .._threading import blas_one_thread, limit_threads
    from .voters import solver_name

    model._check_params()
    n = int(X.shape[0])
    per_voter = -(-n // int(model.n_voters)) if model.strategy == "partition" else n
    rows = max(1, min(per_voter, int(max_rows)))
    try:
        Xs, ys = X[:rows], y[:rows]
        Xs = Xs.compute() if hasattr(Xs, "compute") else Xs
        ys = np.asarray(ys.compute() if hasattr(ys, "compute") else ys)
        template = model._template()
        if getattr(template, "gamma", None) == "scale":
            from ..kernels import scale_gamma

            template.set_params(gamma=float(scale_gamma(Xs, getattr(template, "kernel",
                                                                      "gaussian"))))
        projector, linear = clone(model).set_params(n_voters=1)._voters(
            model.random_state or 0, template, per_voter)[0]
        measured = []
        with limit_threads(1), blas_one_thread():
            for _ in range(2):  # the faster of two: the first pays one-time costs
                t0 = time.perf_counter()
                result = train_voter(Xs, ys, projector, linear, 0)
                measured.append(time.perf_counter() - t0)
        measured = min(measured)
    except Exception as exc:  # noqa: BLE001 - an estimate is a courtesy; fit decides
        logging.getLogger(__name__).info("no time estimate: the sample could not train a "
                                         "voter (%s)", exc)
        return None
    return {"seconds": measured * per_voter / rows, "measured": measured,
            "sample_rows": rows, "rows_per_voter": per_voter,
            "solver": solver_name(result["model_class"], result["model_params"])}
