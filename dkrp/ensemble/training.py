"""The training strategies of the ensemble on a Dask cluster.

``"full"`` (:func:`fit_full`): every voter sees all rows, one task per voter.
``"partition"`` (:func:`fit_partition`): one voter per row block through dask-ml's
``BlockwiseVotingClassifier``, subclassed so every block gets its own seeds. Both
run on a ``distributed.Client`` when given (or the default client), in this process
otherwise; this module also owns the progress callback, the gathering of voter
futures (cancelled on failure) and the finite-rows check of dask input.
See :mod:`dkrp.ensemble` for the data movement of each strategy.
"""

from __future__ import annotations

from .._validation import check_finite_rows
from ..errors import Message, Param
from .voters import _train_voter


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

            from .._blockwise import row_offsets

            Xs = X.to_delayed().flatten()
            ys = y.to_delayed().flatten()
            if len(Xs) != len(ys):
                raise ValueError(
                    f"The number of blocks in X and y must match. {len(Xs)} != {len(ys)}")
            if len(Xs) != len(self.voters):
                raise ValueError(
                    f"{len(Xs)} row blocks for {len(self.voters)} voters: the partition "
                    "strategy trains voter i on row block i. Set n_voters to the number "
                    f"of row blocks ({len(Xs)}), or rechunk X (and y) to {len(self.voters)} "
                    "row blocks.")
            offsets = row_offsets(X.chunks[0])
            train = dask.delayed(_train_voter, pure=True)
            return [
                train(Xb, yb, proj, model, i, partition=i, row_offset=offsets[i],
                      dask_key_name=f"dkrp-voter-{dask.base.tokenize(Xb.key, i)}")
                for i, (Xb, yb, (proj, model)) in enumerate(zip(Xs, ys, self.voters, strict=True))
            ]

    return SeededBlockwiseVotingClassifier


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


def fit_full(X, y, voters, client, report, dask_input):
    """Strategy ``"full"``: every voter trains on all rows, one task each.

    ``X`` reaches each worker once (scattered with ``broadcast=True``, or assembled on
    a worker from its graph); without a client the voters train here in turn.
    Returns the :func:`_train_voter` results.
    """
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


def fit_partition(X, y, voters, client, report, dask_input, *, voting, classes):
    """Strategy ``"partition"``: voter ``i`` trains on row block ``i``, where it lives.

    Through dask-ml's blockwise voter (:func:`_blockwise_class`). Returns the
    :func:`_train_voter` results and the blockwise estimator.
    """
    import dask
    import dask.array as da

    total = n_voters = len(voters)
    if not dask_input:
        sizes = partition_sizes(X.shape[0], n_voters)
        _check_partition_classes(y, sizes)
        X = da.from_array(X, chunks=(sizes, -1), asarray=False)
        y = da.from_array(y, chunks=(sizes,))
    blockwise = _blockwise_class()(voting=voting, classes=classes, voters=voters)
    tasks = blockwise.fit_tasks(X, y)
    if client is None:
        results = list(dask.compute(*tasks))
        report(total, total)
        return results, blockwise
    return _gather(client.compute(tasks), client, report, total), blockwise


def partition_sizes(n_rows: int, n_voters: int) -> tuple:
    """Rows of each of ``n_voters`` consecutive row blocks: as equal as can be, the
    first ``n_rows % n_voters`` one row longer (9 rows, 4 voters: 3, 2, 2, 2).

    Examples
    --------
    >>> partition_sizes(9, 4)
    (3, 2, 2, 2)
    """
    if n_rows < n_voters:
        raise ValueError(Message(
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
            raise ValueError(Message(
                "Row block {} (rows {}..{}) holds one class only ({!r}): its partition voter "
                "cannot learn a classifier. Shuffle the rows, use fewer voters (larger "
                "blocks), or {}.", i, start, start + n - 1, labels[0].item(),
                Param("strategy", "full")))
        start += n


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

    from .._threading import _blas_one_thread, limit_threads
    from .voters import _solver_name

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
        with limit_threads(1), _blas_one_thread():
            for _ in range(2):  # the faster of two: the first pays one-time costs
                t0 = time.perf_counter()
                result = _train_voter(Xs, ys, projector, linear, 0)
                measured.append(time.perf_counter() - t0)
        measured = min(measured)
    except Exception as exc:  # noqa: BLE001 - an estimate is a courtesy; fit decides
        logging.getLogger(__name__).info("no time estimate: the sample could not train a "
                                         "voter (%s)", exc)
        return None
    return {"seconds": measured * per_voter / rows, "measured": measured,
            "sample_rows": rows, "rows_per_voter": per_voter,
            "solver": _solver_name(result["model_class"], result["model_params"])}
