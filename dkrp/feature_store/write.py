"""Writing a feature store: the resumable, idempotent write protocol.

This module owns :func:`write_features` (plan, then write) and :func:`write_plan`
(carry out a plan from :func:`dkrp.feature_store.plan_features`).

Protocol
--------
1. Everything is checked before anything is written: input shape and features
   (:func:`dkrp.parallel.prepare_input`), and, for an existing store, that its spec,
   input fingerprint, dtype and shape are those of this run. A mismatch is refused
   with an error naming it (unless ``overwrite=True``); the store is not touched.
2. A new store gets its attributes with ``complete: false``, ``Z`` and ``done``
   before the first chunk.
3. One task per missing chunk: featurize the row block, write it as exactly one Zarr
   chunk of ``Z`` (rows aligned with the chunk grid: no two tasks share a chunk, the
   only safe concurrent write in Zarr), then set its done marker. A task may run
   twice (a worker dies after writing): the rewrite produces identical bytes.
4. After every chunk is done, ``complete: true`` is written, last.

A rerun reads ``done`` and schedules only the missing chunks (not marked done, or
whose chunk file has been deleted since); finished chunk files are not rewritten. It
also deletes Zarr's temporary ``*.partial`` files that a writer killed mid-write left
behind (a single writer per store is assumed, as everywhere here). Readers
(:func:`dkrp.feature_store.open_features`) refuse incomplete stores and missing chunks;
a corrupt chunk is found by its checksum on read, and ``dkrp verify STORE --repair``
(:func:`dkrp.feature_store.verify_store`) rewrites it.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import numpy as np

from ..errors import FeatureStoreError
from .format import _create, _done_chunks, _written_chunks
from .plan import plan_features
from .tasks import _run_tasks

logger = logging.getLogger(__name__)

__all__ = ["write_features", "write_plan"]


def write_features(
    X,
    projector,
    out_path,
    *,
    client=None,
    overwrite=False,
    progress=True,
    dtype=None,
    source=None,
    fingerprint=None,
    retries=0,
):
    """Featurize ``X`` into a resumable Zarr v3 feature store.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Dense or CSR blocks with known row chunks; rows are rechunked onto a regular
        grid if the blocks are irregular (or onto the grid of an existing store).
    projector : BaseProjector
        Fitted.
    out_path : str or os.PathLike
        Store directory (local or shared file system, visible to all workers).
    client : distributed.Client, optional
        Default: the current default client, if any, else dask's local scheduler.
    overwrite : bool, default=False
        Replace a store made by another spec/input/dtype. Without it such a store is
        refused and left untouched.
    progress : bool or callable, default=True
        True shows a tqdm bar on stderr; a callable is called as
        ``progress(done, total)`` after each chunk; False is silent.
    dtype : {None, "float32", "float64"}
        Output dtype (default: float32 for float32 input, else float64).
    source : dict, optional
        Provenance of ``X`` for the input fingerprint (see :func:`input_fingerprint`).
    fingerprint : dict, optional
        A precomputed input fingerprint (overrides ``source``).
    retries : int, default=0
        Run a partition's task up to ``retries`` more times when it raises (a
        transient ``OSError`` on a shared file system, say), as ``Client.compute(...,
        retries=)`` does; on dask's local scheduler the task retries itself. Rewriting
        a chunk is idempotent. Workers that die are covered separately, by Dask's
        ``distributed.scheduler.allowed-failures``.

    Returns
    -------
    dict
        ``path``, ``rows``, ``n_components``, ``dtype``, ``seconds``, ``rows_per_second``,
        ``chunks_written``, ``chunks_skipped``, ``n_chunks``.

    Raises
    ------
    FeatureStoreMismatchError
        The store at ``out_path`` was made by another projector, input, dtype or shape.
    PartitionError
        A partition's task kept failing: it killed its worker repeatedly (wrapping
        ``KilledWorker``) or raised on every one of its ``retries + 1`` attempts
        (wrapping the original exception). The message names the partition, its rows
        and the original error; the store stays incomplete with finished chunks kept.
    FeatureStoreError
        ``out_path`` holds something that is not a feature store.
    ValueError
        Bad input: wrong feature count (before any task runs), NaN/inf (naming the
        partition and global row).
    """
    from .._validation import check_integer

    retries = check_integer("retries", retries, minimum=0)
    plan = plan_features(X, projector, out_path, overwrite=overwrite, dtype=dtype,
                         source=source, fingerprint=fingerprint)
    return write_plan(plan, projector, client=client, progress=progress, retries=retries)


def write_plan(plan, projector, *, client=None, progress=True, retries=0):
    """Carry out a plan of :func:`~dkrp.feature_store.plan_features`: write what it found missing.

    :func:`write_features` is ``plan_features`` then ``write_plan``; calling them
    apart lets a caller look at the plan (or skip starting a cluster for a finished
    store) without checking the store twice. Nothing may write to the store between
    the two calls.

    Parameters
    ----------
    plan : dict
        From :func:`~dkrp.feature_store.plan_features` for ``projector``.
    projector : BaseProjector
        The fitted projector the plan was made for.
    client, progress, retries
        As for :func:`write_features`.

    Returns
    -------
    dict
        As :func:`write_features`; ``seconds`` counts the planning too.

    Raises
    ------
    PartitionError, FeatureStoreError, ValueError
        As :func:`write_features`.
    """
    from .._validation import check_integer

    retries = check_integer("retries", retries, minimum=0)
    t0 = time.perf_counter() - plan.get("seconds", 0.0)
    path, attrs, X, out_dtype = plan["path"], plan["attrs"], plan["X"], plan["dtype"]
    n_chunks = attrs["n_chunks"]
    if plan["action"] == "noop":
        return _summary(path, attrs, t0, written=0, skipped=n_chunks)
    if plan["action"] == "create":
        if path.exists():
            logger.info("overwriting %s", path)
            shutil.rmtree(path)
        _create(path, attrs)
        done = np.zeros(n_chunks, dtype=bool)
    else:
        _remove_partial_files(path)
        done = _written_chunks(path, n_chunks)  # a chunk file deleted since is redone

    todo = [int(i) for i in np.flatnonzero(~done)]
    skipped = n_chunks - len(todo)
    logger.info("%s: %d of %d chunks to write", path, len(todo), n_chunks)
    _run_tasks(X, projector, out_dtype, path, todo, client, progress, n_chunks, skipped,
               retries)

    if not _done_chunks(path, n_chunks).all():  # pragma: no cover - defensive
        raise FeatureStoreError(f"{path}: some chunks are not marked done after the run.")
    import zarr

    group = zarr.open_group(str(path), mode="r+")
    final = dict(attrs)
    final["complete"] = True
    group.attrs.update(final)  # the completion marker, last
    return _summary(path, attrs, t0, written=len(todo), skipped=skipped)


def _remove_partial_files(path: Path):
    """Delete the temporary files of writers that were killed mid-write.

    Zarr's local store writes a chunk to ``<chunk>.<uuid>.partial`` and renames it;
    a writer killed in between leaves that file behind. Its chunk is not marked
    done, so it is rewritten; the stray file goes, so the finished store holds
    exactly the files of an uninterrupted run.
    """
    for stray in path.rglob("*.partial"):
        logger.info("removing %s, left by a writer killed mid-write", stray)
        stray.unlink(missing_ok=True)


def _summary(path, attrs, t0, *, written, skipped):
    seconds = time.perf_counter() - t0
    rows = attrs["n_samples"]
    return {
        "path": str(path),
        "rows": rows,
        "n_components": attrs["n_components"],
        "dtype": attrs["dtype"],
        "seconds": seconds,
        "rows_per_second": rows / seconds if seconds > 0 else float("inf"),
        "chunks_written": written,
        "chunks_skipped": skipped,
        "n_chunks": attrs["n_chunks"],
    }
