"""Resumable, idempotent feature stores: featurize a dask array straight into Zarr v3.

This module owns dkrp's on-disk *features* format and the write protocol that lets
a killed run resume without redoing finished work.

Store layout (``dkrp_format = "features"``, ``format_version = 1``)
-------------------------------------------------------------------
A Zarr v3 group::

    <path>/zarr.json   group attributes (below)
    <path>/Z           features, shape (n_samples, n_components), chunks (chunk_rows, k),
                       fill value NaN (an unwritten chunk never reads as features)
    <path>/done        uint8, shape (n_chunks,), one chunk per element: 1 once chunk i of
                       Z is written (the per-chunk done marker)

Group attributes: ``dkrp_format``, ``format_version``, ``complete``, ``n_samples``,
``n_components``, ``dtype``, ``chunk_rows``, ``n_chunks``, ``spec`` (the projector's
JSON spec), ``input`` (the input fingerprint) and ``manifest`` (dkrp, numpy, zarr and
dask versions). They hold no timestamps or host names, so two runs of the same job
give byte-identical stores.

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

A rerun reads ``done`` and schedules only the missing chunks; finished chunk files
are not rewritten. It also deletes Zarr's temporary ``*.partial`` files that a writer
killed mid-write left behind (a single writer per store is assumed, as everywhere
here). Readers (:func:`open_features`) refuse incomplete stores.

Only local (or shared POSIX) file systems are supported: workers write chunk files
themselves, so the path must be visible to every worker.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._blockwise import prepare_input, row_offsets, spec_json, transform_partition
from ._spec import from_spec
from .errors import (
    FeatureStoreError,
    FeatureStoreMismatchError,
    PartitionError,
    PartitionInputError,
)

logger = logging.getLogger(__name__)

__all__ = [
    "FEATURES_FORMAT",
    "FeatureSet",
    "FeatureStoreError",
    "FeatureStoreMismatchError",
    "PartitionError",
    "input_fingerprint",
    "open_features",
    "plan_features",
    "write_features",
]

FEATURES_FORMAT = "features"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class FeatureSet:
    """A feature store opened lazily.

    Attributes
    ----------
    Z : dask.array.Array of shape (n_samples, n_components)
        Chunked like the store (one dask block per Zarr chunk).
    attrs : dict
        The group attributes (spec, input fingerprint, manifest, completeness).
    path : pathlib.Path
    """

    Z: object
    attrs: dict = field(repr=False)
    path: Path

    @property
    def complete(self) -> bool:
        return self.attrs.get("complete") is True

    @property
    def spec(self) -> dict:
        return self.attrs["spec"]

    def projector(self):
        """The projector that made these features, rebuilt from the spec."""
        return from_spec(self.spec)


# -- fingerprints and attributes ----------------------------------------------------------


def input_fingerprint(X, source=None) -> dict:
    """What identifies the input of a run, without reading all of it.

    Parameters
    ----------
    X : dask.array.Array
    source : dict, optional
        Provenance of ``X``, e.g. the attributes of the dataset store it was read
        from (``dkrp.io.open_dataset(...).attrs``) plus its path. Recorded as a
        SHA-256 of its canonical JSON, and the path where given.

    Returns
    -------
    dict
        ``shape``, ``dtype``, ``storage`` (dense/csr), ``source_sha256`` (of
        ``source``, or None) and ``edge_rows_sha256``: a hash of the first and last
        rows (so a different array of the same shape is caught even without
        provenance).
    """
    import dask

    sparse = _is_sparse_meta(X)
    n = int(X.shape[0])
    h = hashlib.sha256()
    if n:
        first, last = dask.compute(X[:1], X[n - 1 :])
        for part in (first, last):
            part = part.toarray() if hasattr(part, "toarray") else np.asarray(part)
            h.update(np.ascontiguousarray(part, dtype=np.float64).tobytes())
    fp = {
        "shape": [int(s) for s in X.shape],
        "dtype": str(X.dtype),
        "storage": "csr" if sparse else "dense",
        "edge_rows_sha256": h.hexdigest(),
        "source_sha256": None,
    }
    if source is not None:
        text = json.dumps(source, sort_keys=True, default=str)
        fp["source_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if isinstance(source, dict) and "path" in source:
            fp["source_path"] = str(source["path"])
    return fp


def _is_sparse_meta(X) -> bool:
    import scipy.sparse as sp

    return sp.issparse(getattr(X, "_meta", None))


def _manifest() -> dict:
    import dask
    import zarr

    from . import __version__

    return {
        "dkrp": __version__,
        "numpy": np.__version__,
        "zarr": zarr.__version__,
        "dask": dask.__version__,
    }


def _regular_chunk_rows(chunks) -> int | None:
    """The chunk size if ``chunks`` is a regular grid (all equal but a shorter last)."""
    if not chunks:
        return None
    size = chunks[0]
    if all(c == size for c in chunks[:-1]) and chunks[-1] <= size and size > 0:
        return int(size)
    return None


def _align_rows(X, chunk_rows=None):
    """Rechunk ``X`` rows onto a regular grid (Zarr's) unless already on one.

    Zarr chunks have one size (the last may be short); dask blocks may not. A
    misaligned block would make two tasks write one chunk, which Zarr does not
    lock, so blocks are rechunked to the grid before anything is written.
    """
    n = int(X.shape[0])
    if chunk_rows is None:
        chunk_rows = _regular_chunk_rows(X.chunks[0]) or max(1, max(X.chunks[0], default=1))
    chunk_rows = max(1, int(chunk_rows))
    target = tuple([chunk_rows] * (n // chunk_rows) + ([n % chunk_rows] if n % chunk_rows else []))
    if n == 0:
        target = (0,)
    if tuple(X.chunks[0]) != target:
        logger.info("rechunking input rows %s -> %s to align with the output chunks",
                    X.chunks[0][:4], chunk_rows)
        X = X.rechunk({0: target})
    return X, chunk_rows


def _expected_attrs(projector, X, dtype, chunk_rows, fingerprint) -> dict:
    spec = json.loads(spec_json(projector))
    n = int(X.shape[0])
    k = int(projector._n_features_out)
    n_chunks = len(X.chunks[0]) if n else 0
    return {
        "dkrp_format": FEATURES_FORMAT,
        "format_version": FORMAT_VERSION,
        "complete": False,
        "n_samples": n,
        "n_components": k,
        "dtype": np.dtype(dtype).name,
        "chunk_rows": int(chunk_rows),
        "n_chunks": n_chunks,
        "spec": spec,
        "input": fingerprint,
        "manifest": _manifest(),
    }


def _read_attrs(path: Path) -> dict | None:
    import zarr

    if not (path / "zarr.json").is_file():
        return None
    try:
        return dict(zarr.open_group(str(path), mode="r").attrs)
    except Exception:  # noqa: BLE001 - an unreadable store is "not a feature store"
        return None


def _mismatches(old: dict, new: dict) -> list[str]:
    """Human-readable differences that forbid resuming ``old`` with ``new``."""
    out = []
    old_spec, new_spec = old.get("spec") or {}, new["spec"]
    if old_spec.get("class") != new_spec["class"]:
        out.append(
            f"projector class: store {old_spec.get('class')!r}, this run {new_spec['class']!r}"
        )
    old_params, new_params = old_spec.get("params") or {}, new_spec["params"]
    for key in sorted(set(old_params) | set(new_params)):
        a, b = old_params.get(key), new_params.get(key)
        if a != b:
            name = "seed (random_state)" if key == "random_state" else key
            out.append(f"{name}: store {a!r}, this run {b!r}")
    if not out and old_spec.get("checksum") != new_spec.get("checksum"):
        out.append("projector checksum (other hyperplanes from the same parameters)")
    if old_spec.get("n_features_in") != new_spec["n_features_in"]:
        out.append(
            f"n_features_in: store {old_spec.get('n_features_in')}, this run "
            f"{new_spec['n_features_in']}"
        )
    for key in ("dtype", "n_samples", "n_components"):
        if old.get(key) != new[key]:
            out.append(f"{key}: store {old.get(key)!r}, this run {new[key]!r}")
    old_in, new_in = old.get("input") or {}, new["input"]
    for key in sorted(set(old_in) | set(new_in)):
        if old_in.get(key) != new_in.get(key):
            out.append(f"input {key}: store {old_in.get(key)!r}, this run {new_in.get(key)!r}")
    if old.get("format_version") != FORMAT_VERSION:
        out.append(
            f"format_version: store {old.get('format_version')!r}, this dkrp {FORMAT_VERSION}"
        )
    return out


def _create(path: Path, attrs: dict):
    import zarr

    path.parent.mkdir(parents=True, exist_ok=True)
    group = zarr.open_group(str(path), mode="w", zarr_format=3)
    group.attrs.update(attrs)  # complete: false, before the first chunk
    n, k = attrs["n_samples"], attrs["n_components"]
    group.create_array(
        "Z",
        shape=(n, k),
        chunks=(max(1, attrs["chunk_rows"]), max(1, k)),
        dtype=attrs["dtype"],
        fill_value=np.nan,
        # Random features are incompressible noise to zstd (measured: 94% of raw size
        # at 2.8x the write time for a 16384 x 2000 float32 KRP chunk); store them raw.
        compressors=None,
        config={"write_empty_chunks": True},
    )
    group.create_array(
        "done",
        shape=(attrs["n_chunks"],),
        chunks=(1,),
        dtype="uint8",
        fill_value=0,
        config={"write_empty_chunks": True},
    )
    return group


def _done_chunks(path: Path, n_chunks: int) -> np.ndarray:
    import zarr

    if n_chunks == 0:
        return np.zeros(0, dtype=bool)
    done = zarr.open_array(str(path / "done"), mode="r")
    return np.asarray(done[:]) == 1


# -- the write task ------------------------------------------------------------------------


def _write_chunk(block, spec_text, dtype, path, chunk, row_start):
    """Featurize one row block and write it as chunk ``chunk`` of ``Z``, then mark it done.

    Module-level and pure; runs on a worker. Idempotent: a second run writes the
    same bytes to the same chunk file.
    """
    import zarr

    Z = transform_partition(block, spec_text, dtype, row_start, chunk)
    stop = row_start + Z.shape[0]
    zarr.open_array(str(Path(path) / "Z"), mode="r+")[row_start:stop] = Z
    # the marker comes after the chunk: a task killed in between leaves the chunk "missing"
    zarr.open_array(str(Path(path) / "done"), mode="r+")[chunk] = 1
    return chunk, int(Z.shape[0])


def _write_chunk_retrying(block, spec_text, dtype, path, chunk, row_start, retries):
    """:func:`_write_chunk` with ``retries`` in-task retries (dask's local scheduler has
    none of its own); the final failure names the partition (:func:`_partition_failure`).
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return _write_chunk(block, spec_text, dtype, path, chunk, row_start)
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
        message = (f"{where} failed after {attempts} {plural}: {type(exc).__name__}: {exc}; "
                   + tail + (" (or pass retries=N, --retries N, if the error is transient)."
                             if attempts == 1 else "."))
    return PartitionError(message, partition=chunk, rows=rows, attempts=attempts)


# -- public API ---------------------------------------------------------------------------


def plan_features(X, projector, out_path, *, overwrite=False, dtype=None, source=None,
                  fingerprint=None) -> dict:
    """Check a feature-store run before anything is written or any cluster is started.

    Validates ``X`` for ``projector`` (feature count, 2-D, numeric) and compares an
    existing store at ``out_path`` with this run.

    Returns
    -------
    dict
        ``action`` (``"create"``, ``"resume"`` or ``"noop"`` for a finished store),
        ``path``, ``attrs`` (the attributes the store will have), ``X`` (validated,
        rows aligned with the output chunks), ``dtype`` and ``missing`` (chunks to
        write).

    Raises
    ------
    FeatureStoreMismatchError, FeatureStoreError, ValueError
        As :func:`write_features`; nothing is changed on disk.
    """
    path = Path(out_path).expanduser().absolute()
    X, out_dtype = prepare_input(X, projector, dtype=dtype)
    if fingerprint is None:
        fingerprint = input_fingerprint(X, source=source)
    old = _read_attrs(path) if path.exists() else None
    resumable = old is not None and old.get("dkrp_format") == FEATURES_FORMAT
    if path.exists() and not resumable and not overwrite:
        raise FeatureStoreError(
            f"{path} exists and is not a dkrp feature store; choose another output path "
            "(or pass overwrite=True / --overwrite to replace it)."
        )
    chunk_rows = int(old.get("chunk_rows", 0)) if resumable else None
    X, chunk_rows = _align_rows(X, chunk_rows or None)
    attrs = _expected_attrs(projector, X, out_dtype, chunk_rows, fingerprint)
    if resumable:
        problems = _mismatches(old, attrs)
        if problems and not overwrite:
            raise FeatureStoreMismatchError(
                f"The feature store {path} was made by another run: "
                + "; ".join(problems)
                + ". Nothing was changed. Use another output path, or pass overwrite=True "
                "(--overwrite) to replace it."
            )
        if problems:
            resumable = False
    n_chunks = attrs["n_chunks"]
    if not resumable:
        return {"action": "create", "path": path, "attrs": attrs, "X": X, "dtype": out_dtype,
                "missing": n_chunks}
    done = _done_chunks(path, n_chunks)
    missing = int((~done).sum())
    action = "noop" if (old.get("complete") is True and missing == 0) else "resume"
    return {"action": action, "path": path, "attrs": attrs, "X": X, "dtype": out_dtype,
            "missing": missing}


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
    from ._validation import check_integer

    retries = check_integer("retries", retries, minimum=0)
    t0 = time.perf_counter()
    plan = plan_features(X, projector, out_path, overwrite=overwrite, dtype=dtype,
                         source=source, fingerprint=fingerprint)
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
        done = _done_chunks(path, n_chunks)

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


def _default_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def _run_tasks(X, projector, dtype, path, todo, client, progress, n_chunks, skipped,
               retries=0):
    import dask
    from dask.base import tokenize

    if not todo:
        return
    text = spec_json(projector)
    offsets = row_offsets(X.chunks[0])
    blocks = X.to_delayed().ravel()
    dtype_str = np.dtype(dtype).str
    token = tokenize(X.name, text, dtype_str, str(path))

    def rows(i):
        return offsets[i], offsets[i] + X.chunks[0][i] - 1

    bar, report = _progress(progress, n_chunks, skipped)
    try:
        client = client if client is not None else _default_client()
        if client is None:  # dask's local scheduler (threads unless configured otherwise)
            tasks = [
                dask.delayed(_write_chunk_retrying, pure=True)(
                    blocks[i], text, dtype_str, str(path), i, offsets[i], retries,
                    dask_key_name=f"dkrp-write-{token}-{i}",
                )
                for i in todo
            ]
            dask.compute(*tasks)
            for _ in tasks:
                report()
            return
        from distributed import as_completed

        tasks = [
            dask.delayed(_write_chunk, pure=True)(
                blocks[i], text, dtype_str, str(path), i, offsets[i],
                dask_key_name=f"dkrp-write-{token}-{i}",
            )
            for i in todo
        ]
        futures = client.compute(tasks, retries=retries)
        pending = {f.key: (f, i) for f, i in zip(futures, todo)}
        del futures
        try:
            # loop=: the client need not be the default one
            for future in as_completed([f for f, _ in pending.values()], loop=client.loop):
                _, i = pending.pop(future.key)
                try:
                    future.result()
                except Exception as exc:  # noqa: BLE001 - re-raised, naming the partition
                    attempts = _attempts(exc, retries, client)
                    error = _partition_failure(exc, i, rows(i), path, attempts)
                    if error is None:
                        raise
                    raise error from exc
                # a finished chunk's result is not needed again: released, a worker's
                # death cannot make the scheduler recompute (rewrite) it
                future.release()
                report()
        finally:
            client.cancel([f for f, _ in pending.values() if not f.done()])
    finally:
        if bar is not None:
            bar.close()


def _attempts(exc, retries, client) -> int:
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


def open_features(path, *, allow_incomplete=False) -> FeatureSet:
    """Open a feature store as a lazy dask array.

    Parameters
    ----------
    path : str or os.PathLike
    allow_incomplete : bool, default=False
        Open a store whose run has not finished (unwritten chunks read as NaN).

    Returns
    -------
    FeatureSet

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    FeatureStoreError
        Not a feature store, or incomplete (the message says how many chunks are
        missing and how to finish it).
    """
    import dask.array as da
    import zarr

    path = Path(path).expanduser().absolute()
    if not path.exists():
        raise FileNotFoundError(f"No feature store at {path}: the path does not exist.")
    attrs = _read_attrs(path)
    if attrs is None or attrs.get("dkrp_format") != FEATURES_FORMAT:
        raise FeatureStoreError(
            f"{path} is not a dkrp feature store (attribute dkrp_format is "
            f"{None if attrs is None else attrs.get('dkrp_format')!r}, expected "
            f"{FEATURES_FORMAT!r})."
        )
    if attrs.get("complete") is not True and not allow_incomplete:
        n_chunks = int(attrs.get("n_chunks", 0))
        missing = n_chunks - int(_done_chunks(path, n_chunks).sum())
        raise FeatureStoreError(
            f"Feature store {path} is incomplete: its run did not finish ({missing} of "
            f"{n_chunks} chunks missing). Run the same featurize command again to write the "
            "missing chunks, or pass allow_incomplete=True to inspect it."
        )
    array = zarr.open_array(str(path / "Z"), mode="r")
    Z = da.from_zarr(array, chunks=array.chunks)
    return FeatureSet(Z=Z, attrs=attrs, path=path)
