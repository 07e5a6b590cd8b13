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
   before the first chunk, and the input's labels ``y`` (small: copied whole by
   the client) when there are any.
3. One task per missing chunk: featurize the row block, write it as exactly one Zarr
   chunk of ``Z`` (rows aligned with the chunk grid: no two tasks share a chunk, the
   only safe concurrent write in Zarr), then set its done marker. A task may run
   twice (a worker dies after writing): the rewrite produces identical bytes.
4. After every chunk is done, ``complete: true`` is written, last.
5. ``overwrite=True`` never deletes a store first: the new one is built in the hidden
   sibling ``.<name>.overwrite`` and swapped in only once complete (old store renamed
   aside to ``.<name>.replaced``, new one renamed in, old one deleted). A run that fails,
   is interrupted or killed leaves the old store complete and readable; the same command
   run again resumes the sibling (another job's sibling is discarded). Only feature
   stores are ever replaced, never the input (:func:`~dkrp.feature_store.plan.check_output_path`).

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
import os
import shutil
import time
from pathlib import Path

import numpy as np

from .._blockwise import current_client
from ..errors import FeatureStoreError
from .fingerprint import (
    edge_rows_sha256,
    fingerprint_pending,
    read_edge_rows,
    read_edge_rows_sha256,
)
from .format import (
    create_store,
    done_chunks,
    write_labels,
    written_chunks,
)
from .options import StoreOptions
from .plan import plan_features
from .tasks import run_chunk_writes

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
    bits=False,
    store_dtype=None,
    compressor=None,
    store=None,
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
        Replace a *feature store* made by another spec/input/dtype, atomically: the new
        store is built beside it and swapped in only once complete (see Protocol, 5).
        Without it such a store is refused and left untouched. Anything that is not a
        feature store (user files, a dataset store, the input itself) is refused either
        way.
    progress : bool or callable, default=True
        True shows a tqdm bar on stderr; a callable is called as
        ``progress(done, total)`` after each chunk; False is silent.
    dtype : {None, "float32", "float64"}
        The dtype the features are computed in (default: float32 for float32 input,
        else float64), and stored in unless ``store_dtype`` says otherwise.
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
    bits : bool, default=False
        Store the packed sign bits of a SignProductEmbedding (``transform_bits``: uint8,
        ``ceil(n_components/8)`` bytes per row) instead of its features.
    store_dtype : {None, "float16", "float32", "float64"}
        Store the features in this dtype (default: ``dtype``); a value that overflows it
        fails its partition (:class:`~dkrp.errors.PartitionInputError`) and the store
        stays incomplete.
    compressor : {None, "none", "zstd", "gzip", "blosc-lz4", "blosc-zstd"}
        Codec of each chunk (default none). See :mod:`dkrp.feature_store.encoding`.
    store : StoreOptions, optional
        ``dtype``, ``bits``, ``store_dtype`` and ``compressor`` (and ``chunk_rows``) as
        one value (:class:`~dkrp.feature_store.StoreOptions`), instead of those keywords.

    Returns
    -------
    dict
        ``path``, ``rows``, ``n_components``, ``dtype`` (as stored), ``encoding``,
        ``seconds``, ``rows_per_second``, ``chunks_written``, ``chunks_skipped``,
        ``n_chunks``.

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
        ``out_path`` holds something that is not a feature store, or is (or contains,
        or lies inside) the input named by ``source``/``fingerprint``.
    ValueError
        Bad input: no rows or a wrong feature count (before any task runs), NaN/inf
        (naming the partition and global row).
    """
    from .._validation import check_integer

    retries = check_integer("retries", retries, minimum=0)
    store = StoreOptions.given(store, where="write_features", dtype=dtype, bits=bits,
                               store_dtype=store_dtype, compressor=compressor)
    plan = plan_features(X, projector, out_path, overwrite=overwrite, source=source,
                         fingerprint=fingerprint, store=store)
    return write_plan(plan, projector, client=client, progress=progress, retries=retries)


def write_plan(plan, projector, *, client=None, progress=True, retries=0, on_edge_rows=None):
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
    on_edge_rows : callable, optional
        Called as ``on_edge_rows(first, last)`` with the input's first and last rows
        (one row each) when the run reads them for a new store's fingerprint: before
        the first chunk on dask's local scheduler, as the first round of tasks brings
        them back on a cluster. Not called when the plan read them already
        (``plan["edge_rows"]``).

    Returns
    -------
    dict
        As :func:`write_features`; ``seconds`` counts the planning too.

    Raises
    ------
    PartitionError, FeatureStoreError, ValueError
        As :func:`write_features`.
    """
    import zarr

    from .._store import write_attrs
    from .._validation import check_integer

    retries = check_integer("retries", retries, minimum=0)
    t0 = time.perf_counter() - plan.get("seconds", 0.0)
    path, attrs, X, out_dtype = plan["path"], plan["attrs"], plan["X"], plan["dtype"]
    build = plan.get("build_path", path)
    n_chunks = attrs["n_chunks"]
    if plan["action"] == "noop":
        return _summary(path, attrs, t0, written=0, skipped=n_chunks)
    client = client if client is not None else current_client()
    done, edges_later = _prepare_build(plan, build, path, attrs, X, client, on_edge_rows)
    if plan.get("labels") is not None:
        # before the first chunk (and on resume, if a killed run had not got to them yet)
        write_labels(build, plan["labels"], attrs["chunk_rows"])

    todo = [int(i) for i in np.flatnonzero(~done)]
    skipped = n_chunks - len(todo)
    logger.info("%s: %d of %d chunks to write", build, len(todo), n_chunks)

    def record_edge_rows(digest):
        """The input fingerprint, complete: written before any other attribute change."""
        attrs["input"]["edge_rows_sha256"] = digest
        write_attrs(zarr.open_group(str(build), mode="r+"), attrs)

    def edge_rows_read(*rows):
        record_edge_rows(edge_rows_sha256(*rows))
        if on_edge_rows is not None:
            on_edge_rows(*rows)

    try:
        run_chunk_writes(X, projector, out_dtype, build, todo, client, progress, n_chunks, skipped,
                         retries, store=plan.get("store"),
                         on_edge_rows=edge_rows_read if edges_later else None)
    except BaseException:
        if edges_later and fingerprint_pending(attrs):
            # a failed or interrupted (Ctrl-C) run keeps its finished chunks for the next
            # one (not so a killed one): the edge chunks' results may not have reached
            # this loop yet, so the rows are read here
            try:
                record_edge_rows(read_edge_rows_sha256(X))
            except Exception:  # noqa: BLE001 - the run's own error is the one to raise
                logger.info("%s: the input's first and last rows could not be read",
                            build, exc_info=True)
        raise
    _complete(plan, build, path, attrs, X, n_chunks, record_edge_rows)
    return _summary(path, attrs, t0, written=len(todo), skipped=skipped)


def _prepare_build(plan, build, path, attrs, X, client, on_edge_rows):
    """``(done, edges_later)``: a new store created at ``build`` (its input's edge rows read
    first on dask's local scheduler), or a resumed one cleared of temporary files."""
    n_chunks = attrs["n_chunks"]
    edges_later = fingerprint_pending(attrs)
    if plan["action"] == "create":
        if build.exists() and (build != path or plan.get("restart")):
            # plan_features checked it is a feature store: a replacement left by another
            # job, or one whose run was stopped before it recorded its input
            logger.info("removing %s, %s", build, "a store of a run stopped before it "
                        "recorded its input" if plan.get("restart") else
                        "an unfinished replacement of another job")
            shutil.rmtree(build)
        elif build.exists():
            build.rmdir()  # plan_features allows only an empty directory here
        if edges_later and client is None:  # dask's local scheduler: read them now
            rows = read_edge_rows(X)
            attrs["input"]["edge_rows_sha256"] = edge_rows_sha256(*rows)
            edges_later = False
            if on_edge_rows is not None:
                on_edge_rows(*rows)
        create_store(build, attrs)
        done = np.zeros(n_chunks, dtype=bool)
    else:
        remove_partial_files(build)
        done = written_chunks(build, n_chunks)  # a chunk file deleted since is redone
    return done, edges_later


def _complete(plan, build, path, attrs, X, n_chunks, record_edge_rows):
    """Mark the store at ``build`` complete, last, and swap it in over ``path`` if it
    replaces a store there."""
    import zarr

    from .._store import consolidate, write_attrs

    if fingerprint_pending(attrs):  # pragma: no cover - defensive: every chunk ran
        record_edge_rows(read_edge_rows_sha256(X))

    if not done_chunks(build, n_chunks).all():  # pragma: no cover - defensive
        raise FeatureStoreError(f"{build}: some chunks are not marked done after the run.")
    remove_partial_files(build)  # of a worker that died mid-write, its chunk since redone
    consolidate(build)  # the arrays' metadata in the root zarr.json (xarray.open_zarr)
    group = zarr.open_group(str(build), mode="r+")
    final = dict(attrs)
    final["complete"] = True
    write_attrs(group, final)  # the completion marker, last
    if plan.get("replace"):
        _swap_in(build, path)


def _swap_in(build: Path, path: Path):
    """Replace the store at ``path`` by the complete store ``build``, its hidden sibling.

    Two renames in one directory: the old store moves aside to ``.<name>.replaced``, the
    new one takes its place, then the old one is deleted. Until the first rename the old
    store is untouched; a process killed between the renames leaves the complete new
    store at ``.<name>.overwrite`` (the same command swaps it in) and the old one at
    ``.<name>.replaced`` (deleted by the next swap). A symlink at ``path`` keeps pointing
    at the real store, which is what gets replaced.
    """
    real = path.resolve() if path.is_symlink() else path
    aside = real.with_name(f".{real.name}.replaced")
    if aside.exists():
        logger.info("removing %s, a replaced store left by a killed run", aside)
        shutil.rmtree(aside)
    if real.exists():
        os.rename(real, aside)
    os.rename(build, real)
    logger.info("replaced %s", real)
    shutil.rmtree(aside, ignore_errors=True)


def remove_partial_files(path: Path):
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
        "encoding": attrs.get("encoding", "float"),
        "seconds": seconds,
        "rows_per_second": rows / seconds if seconds > 0 else float("inf"),
        "chunks_written": written,
        "chunks_skipped": skipped,
        "n_chunks": attrs["n_chunks"],
    }
