"""The chunk-write tasks of a feature-store run, and running them on Dask.

This module owns what runs on the workers and how it is driven: one task per
missing chunk (featurize the row block, write it as exactly one Zarr chunk of
``Z``, then set its done marker; an uncompressed chunk of more than
:data:`PIPELINE_ROWS` rows is featurized in steps, each written by the process's writer
thread while the next computes), in-task retries on dask's local scheduler and
``Client.compute(retries=)`` on a cluster, turning a partition's final failure
into a :class:`~dkrp.errors.PartitionError` naming it, and progress reporting.
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path

import numpy as np

from .._blockwise import (
    cached_projector,
    current_client,
    row_offsets,
    spec_json,
    transform_partition,
)
from .._chunks import ChunkFile, is_one_chunk, write_rows, writes_raw_chunks
from .._settled import compute_settled, settle
from .._validation import check_finite_rows
from ..errors import Message, Param, PartitionError, PartitionInputError
from .encoding import encode_block
from .format import done_chunks

logger = logging.getLogger(__name__)

__all__ = []


#: Rows featurized per step of a chunk whose previous step is being written meanwhile:
#: a multiple of every map's internal row block (``ROW_BLOCK`` of each map module), so a
#: step computes its rows as the whole chunk would, to the bit.
PIPELINE_ROWS = 2048

_WRITER = None
_WRITER_LOCK = threading.Lock()


def _write_chunk(block, spec_text, dtype, path, chunk, row_start, store="", edge=""):
    """Featurize one row block and write it as chunk ``chunk`` of ``Z``, then mark it done.

    Module-level and pure; runs on a worker. Idempotent: a second run writes the
    same bytes to the same chunk file. ``store`` is what is stored (:func:`_store_token`):
    ``""`` the features as computed, ``"bits"`` packed sign bits, or a dtype string
    (the features cast to it, refusing values that overflow it). ``edge`` (``"first"``,
    ``"last"`` or ``"both"``): the block's first and/or last input row is returned too,
    for the input fingerprint, as ``{"first": row, "last": row}`` after
    ``(chunk, n_rows)``.
    """
    import zarr

    features = Path(path) / "Z"
    array = zarr.open_array(str(features), mode="r+")
    n_rows = int(block.shape[0])
    stored = np.dtype(dtype if store == "" else store) if store != "bits" else None
    if (stored is not None and n_rows > PIPELINE_ROWS
            and is_one_chunk(array, row_start, n_rows) and writes_raw_chunks(array, stored)
            and _fits_projector(block, spec_text)):
        _pipelined_chunk(block, spec_text, dtype, store, features, array, chunk, row_start)
    else:
        output = "bits" if store == "bits" else "features"
        Z = transform_partition(block, spec_text, dtype, row_start, chunk, output)
        if store not in ("", "bits"):
            Z = encode_block(Z, np.dtype(store), chunk, row_start)
        write_rows(features, array, row_start, Z)
    # the marker comes after the chunk: a task killed in between leaves the chunk "missing"
    zarr.open_array(str(Path(path) / "done"), mode="r+")[chunk] = 1
    if not edge:
        return chunk, n_rows
    rows = {"first": block[:1], "last": block[n_rows - 1:]}
    return chunk, n_rows, {k: v for k, v in rows.items() if edge in (k, "both")}


def _fits_projector(block, spec_text) -> bool:
    """Whether ``block`` has the projector's number of features (else the whole block
    goes to :func:`transform_partition`, whose refusal names its shape). The plan
    refuses an input of another width; this keeps a task's refusals in their order
    (shape, then values) should a block of another width reach it all the same."""
    est = cached_projector(spec_text)
    return block.ndim == 2 and block.shape[1] == getattr(est, "n_features_in_", None)


def _pipelined_chunk(block, spec_text, dtype, store, features, array, chunk, row_start):
    """Featurize ``block`` in steps of :data:`PIPELINE_ROWS` rows, each step's features
    written (:class:`~dkrp._chunks.ChunkFile`) by this process's writer thread while the
    next step computes: the disk works beside the cores instead of after them."""
    # the whole block first: a refusal names the row within the partition, as unpiped
    check_finite_rows(block, row_offset=int(row_start), partition=int(chunk))
    steps = range(0, int(block.shape[0]), PIPELINE_ROWS)
    with ChunkFile(features, array, row_start) as chunk_file:
        pending = None
        try:
            for start in steps:
                Z = transform_partition(block[start:start + PIPELINE_ROWS], spec_text, dtype,
                                        row_start + start, chunk, checked=True)
                if store != "":
                    Z = encode_block(Z, np.dtype(store), chunk, row_start + start)
                if pending is not None:
                    pending.result()
                pending = _writer().submit(chunk_file.write, Z)
            pending.result()
        finally:
            if pending is not None:
                pending.exception()  # the file is closed only once its last write is over
        chunk_file.commit()
    logger.debug("%s: chunk %d, %d rows featurized in %d steps, each written during the next",
                 features.parent, chunk, int(block.shape[0]), len(steps))


def _writer():
    """This process's chunk-writer thread (one, kept: its O_DIRECT bounce buffer too)."""
    global _WRITER
    if _WRITER is None:
        from concurrent.futures import ThreadPoolExecutor

        with _WRITER_LOCK:
            if _WRITER is None:
                _WRITER = ThreadPoolExecutor(1, thread_name_prefix="dkrp-chunk-writer")
    return _WRITER


def _write_chunk_retrying(block, spec_text, dtype, path, chunk, row_start, retries,
                          store=""):
    """:func:`_write_chunk` with ``retries`` in-task retries (dask's local scheduler has
    none of its own); the final failure names the partition (:func:`_partition_failure`).
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return _write_chunk(block, spec_text, dtype, path, chunk, row_start, store)
        except Exception as exc:  # noqa: BLE001 - retried, then re-raised with context
            rows = (row_start, row_start + int(block.shape[0]) - 1)
            error = _partition_failure(exc, chunk, rows, path, attempt)
            if error is None:  # bad input (NaN, ...): retrying cannot help
                raise
            if attempt <= retries:
                logger.warning("partition %d failed (attempt %d of %d), retrying: %r",
                               chunk, attempt, retries + 1, exc)
                continue
            raise error from exc


def _partition_failure(exc, chunk, rows, path, attempts):
    """The :class:`PartitionError` to raise for ``exc`` from partition ``chunk``.

    Returns None when ``exc`` already names its partition (the ``ValueError`` of bad
    input, e.g. NaN at a global row, raised by
    :func:`dkrp.parallel.transform_partition`): it is re-raised as it is.
    """
    if isinstance(exc, PartitionInputError):
        return None
    from distributed.scheduler import KilledWorker

    where = f"Partition {chunk} (rows {rows[0]}..{rows[1]})"
    tail = (f"the store {path} is not marked complete and its finished chunks are kept: fix "
            "the cause and run the same job again to write the missing chunks")
    if isinstance(exc, KilledWorker):
        message = (f"{where} killed its worker repeatedly (KilledWorker: {exc}); the "
                   "scheduler gave it up after distributed.scheduler.allowed-failures worker "
                   "deaths; " + tail + ".")
    else:
        plural = "attempt" if attempts == 1 else "attempts"
        message = Message("{} failed after {} {}: {}: {}; {}{}", where, attempts, plural,
                          type(exc).__name__, exc, tail,
                          Message(" (or pass {} if the error is transient).",
                                  Param("retries", metavar="N")) if attempts == 1 else ".")
    return PartitionError(message, partition=chunk, rows=rows, attempts=attempts)


def _store_token(store) -> str:
    """The ``store`` argument of :func:`_write_chunk` for a plan's ``store`` dict (or None)."""
    store = store or {}
    if store.get("bits"):
        return "bits"
    return "" if store.get("store_dtype") is None else np.dtype(store["store_dtype"]).str


def run_chunk_writes(X, projector, dtype, path, todo, client, progress, n_chunks, skipped,
                     retries=0, store=None, on_edge_rows=None):
    """Write chunks ``todo`` of the store at ``path``, on ``client`` or dask's local scheduler.

    ``on_edge_rows(first, last)`` (with a cluster, when ``todo`` is every chunk) gets the
    input's first and last rows from the tasks of the first and last chunks, which are
    sent first: a new store's input fingerprint costs no read and no round trip of its
    own, and is recorded within the run's first round of tasks.
    """
    import dask
    from dask.base import tokenize

    if not todo:
        return
    text = spec_json(projector)
    offsets = row_offsets(X.chunks[0])
    blocks = X.to_delayed().ravel()
    dtype_str = np.dtype(dtype).str
    stored = _store_token(store)
    token = tokenize(X.name, text, dtype_str, str(path), stored)

    def rows(i):
        return offsets[i], offsets[i] + X.chunks[0][i] - 1

    bar, report = _progress(progress, n_chunks, skipped)
    try:
        client = client if client is not None else current_client()
        if client is None:  # dask's local scheduler (threads unless configured otherwise)
            tasks = [
                dask.delayed(_write_chunk_retrying, pure=True)(
                    blocks[i], text, dtype_str, str(path), i, offsets[i], retries, stored,
                    dask_key_name=f"dkrp-write-{token}-{i}",
                )
                for i in todo
            ]
            compute_settled(*tasks)
            for _ in tasks:
                report()
            return
        from distributed import as_completed

        edge = {}
        if on_edge_rows is not None:
            assert len(todo) == n_chunks  # a new store: every chunk
            edge = {0: "first", n_chunks - 1: "last"} if n_chunks > 1 else {0: "both"}
        tasks = {
            i: dask.delayed(_write_chunk, pure=True)(
                blocks[i], text, dtype_str, str(path), i, offsets[i], stored,
                edge.get(i, ""), dask_key_name=f"dkrp-write-{token}-{i}",
            )
            for i in todo
        }
        # the edge chunks first, ahead of the others
        futures = client.compute([tasks[i] for i in edge], retries=retries, priority=1)
        futures += client.compute([tasks[i] for i in todo if i not in edge], retries=retries)
        order = [*edge, *(i for i in todo if i not in edge)]
        pending = {f.key: (f, i) for f, i in zip(futures, order, strict=True)}
        del futures
        rows_of = {}
        try:
            # loop=: the client need not be the default one
            for future in as_completed([f for f, _ in pending.values()], loop=client.loop):
                _, i = pending.pop(future.key)
                try:
                    result = future.result()
                except Exception as exc:  # noqa: BLE001 - re-raised, naming the partition
                    if not done_chunks(Path(path), n_chunks)[i]:
                        # released: the scheduler forgets the erred tasks, whose keys a
                        # read of the same input after this (the input's edge rows) reuses
                        # with another graph, which distributed warns of
                        future.release()
                        attempts = attempts_allowed(exc, retries, client)
                        error = _partition_failure(exc, i, rows(i), path, attempts)
                        if error is None:
                            raise
                        raise error from exc
                    # written and marked done, then run again (a worker died holding its
                    # result before this loop released it): the chunk on disk is whole
                    logger.info("partition %d is written and marked done; a later run of "
                                "its task failed and is ignored: %r", i, exc)
                    result = None
                # a finished chunk's result is not needed again: released, a worker's
                # death cannot make the scheduler recompute (rewrite) it
                future.release()
                if i in edge and result is not None:
                    rows_of.update(result[2])
                    if len(rows_of) == 2:
                        on_edge_rows(rows_of["first"], rows_of["last"])
                report()
        finally:
            # finished ones too: a result the cluster still holds would be computed again
            # (its chunk rewritten) after a worker's death, for as long as a traceback
            # keeps these futures
            client.cancel([f for f, _ in pending.values()])
            if pending and not isinstance(sys.exc_info()[1], KeyboardInterrupt):
                # a cancelled task already running on a worker goes on to write and mark
                # its chunk: wait for those, so that the store the caller sees (done
                # markers, `dkrp info`) no longer changes once this run has raised.
                # Not on Ctrl-C: the user asked to stop now, and a rerun resumes anyway
                settle(client, f"dkrp-write-{token}-")
    finally:
        if bar is not None:
            bar.close()


def attempts_allowed(exc, retries, client) -> int:
    """Attempts a failed task had: ``retries + 1``, or the worker deaths allowed + 1."""
    from distributed.scheduler import KilledWorker

    if not isinstance(exc, KilledWorker):
        return retries + 1
    try:  # the scheduler's own setting (this client's dask.config may differ)
        allowed = client.run_on_scheduler(_allowed_failures)
    except Exception:  # noqa: BLE001 - e.g. a remote scheduler without dkrp installed
        import dask

        allowed = dask.config.get("distributed.scheduler.allowed-failures", 3)
    return int(allowed) + 1


def _allowed_failures(dask_scheduler=None):
    return dask_scheduler.allowed_failures


def _progress(progress, total, initial):
    """A ``report()`` callable advancing a tqdm bar or calling the user's callback."""
    state = {"done": initial}
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=initial, unit="chunk", desc="featurize", leave=False)

    def report():
        state["done"] += 1
        if bar is not None:
            bar.update(1)
        elif callable(progress):
            progress(state["done"], total)

    return bar, report
