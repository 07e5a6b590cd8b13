"""Planning a feature-store run: everything checked before anything is written.

This module owns :func:`plan_features`: validate the input for the projector, align
its rows with the output chunk grid, compare an existing store with this run, and
decide what the run will do (create, resume or nothing). Nothing here writes; a
plan is carried out by :func:`dkrp.feature_store.write_plan`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from .._blockwise import prepare_input
from .._store import read_attrs
from ..errors import FeatureStoreError, FeatureStoreMismatchError, InvalidInputError, Message, Param
from .encoding import row_bytes
from .fingerprint import (
    edge_rows_sha256,
    fingerprint_pending,
    input_fingerprint,
    legacy_source_sha256,
    read_edge_rows,
)
from .format import FEATURES_FORMAT, expected_attrs, written_chunks
from .options import StoreOptions
from .resume import resume_mismatches

logger = logging.getLogger(__name__)

__all__ = ["plan_features"]


def _regular_chunk_rows(chunks) -> int | None:
    """The chunk size if ``chunks`` is a regular grid (all equal but a shorter last)."""
    if not chunks:
        return None
    size = chunks[0]
    if all(c == size for c in chunks[:-1]) and chunks[-1] <= size and size > 0:
        return int(size)
    return None


#: Output bytes per chunk a new store aims at when the input's row chunks would give more
#: (ingest sizes chunks by *input* bytes: 64 MiB of 54 features is 2.5 GB of 2000 features).
#: Of 8, 16, 32, 64 and 128 MiB, 64 MiB cost the least CPU on the Covertype and MNIST shapes
#: on a 2-worker cluster (benchmarks/RESULTS.md, section ``bench_distributed_ratio``);
#: smaller chunks pay per-task and per-read overheads. Four later runs of 32-256 MiB
#: (quiet machine): on Covertype 64 MiB was the fastest in three, 256 MiB in one (2.40 s
#: against 2.54 s); on MNIST 32 and 64 MiB were within 5 % of each other in three, 32 MiB
#: ahead in one; 128 and 256 MiB leave MNIST's 2 workers 3 or 2 chunks and lose 25-55 %
#: of the speed. A store keeps the ``chunk_rows`` it recorded when resumed, whatever this is.
TARGET_CHUNK_BYTES = 64 * 2**20

#: Row blocks of the transforms (512 for KRP, 1024 for RFF, 2048 for Maclaurin): chunk
#: rows chosen here are multiples of it, so the store equals the in-memory transform
#: byte for byte.
ROW_ALIGN = 2048


def choose_chunk_rows(n_rows, row_bytes, max_bytes=TARGET_CHUNK_BYTES) -> int:
    """The most rows whose output fits ``max_bytes``, in whole transform row blocks.

    Parameters
    ----------
    n_rows : int
    row_bytes : int
        Output bytes of one row (``n_components * itemsize``).
    max_bytes : int

    Returns
    -------
    int
        A multiple of :data:`ROW_ALIGN` (or of 512 below it) when one fits, else the
        most rows that fit (at least 1), and never more than ``n_rows``.
    """
    rows = max(1, int(max_bytes) // max(1, int(row_bytes)))
    for align in (ROW_ALIGN, 512):
        if rows >= align:
            rows -= rows % align
            break
    return max(1, min(rows, int(n_rows)))


def task_memory(chunk_rows, n_features, in_itemsize, n_components, out_itemsize,
                model_bytes=0) -> int:
    """Bytes one chunk task holds at its peak (an estimate, on the generous side).

    The input block and its cast to the output dtype, the output block, its copy for
    the write, and the transform's working arrays (taken as one more output block),
    plus the projector the worker regenerates.
    """
    rows = int(chunk_rows)
    return int(rows * n_features * (in_itemsize + out_itemsize)
               + 3 * rows * n_components * out_itemsize + model_bytes)


def new_chunk_rows(X, row_bytes, chunk_rows=None, max_chunk_bytes=None) -> int | None:
    """Rows per chunk of a new store of ``X``: ``chunk_rows`` if given, else those of
    ``X`` (None) when their output fits ``max_chunk_bytes`` (default
    :data:`TARGET_CHUNK_BYTES`), else :func:`choose_chunk_rows`."""
    if chunk_rows is not None:
        return max(1, int(chunk_rows))
    limit = TARGET_CHUNK_BYTES if max_chunk_bytes is None else int(max_chunk_bytes)
    inherited = _regular_chunk_rows(X.chunks[0]) or max(X.chunks[0], default=1)
    if inherited * row_bytes > limit:
        return choose_chunk_rows(X.shape[0], row_bytes, limit)
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


def overwrite_sibling(path) -> Path:
    """Where an ``overwrite`` run builds the store that replaces the one at ``path``.

    A hidden sibling in the same directory (so the final swap is two renames on one
    file system), named after the *real* store when ``path`` is a symlink. Its name is
    fixed, so the same command run again after a crash finds and resumes it.
    """
    real = Path(path).expanduser().absolute()
    real = real.resolve() if real.is_symlink() else real
    return real.with_name(f".{real.name}.overwrite")


def _inside(inner: Path, outer: Path) -> bool:
    return outer in inner.parents


def check_output_path(out_path, *, input_path=None) -> None:
    """Refuse an output path whose use could lose data; nothing on disk is changed.

    ``out_path`` may be missing, an empty directory or a dkrp feature store (which
    only ``overwrite=True`` replaces, and only once its replacement is complete).
    Anything else (a file, a directory of other files, a dataset store) is refused,
    ``overwrite`` or not, as is an output that is, contains or lies inside the input
    (after resolving symlinks and relative paths).

    Parameters
    ----------
    out_path : str or os.PathLike
    input_path : str or os.PathLike, optional
        The input the features are made from, when it is a path.

    Raises
    ------
    FeatureStoreError
        Naming the path, what is there, and what to do instead.
    """
    path = Path(out_path).expanduser().absolute()
    if input_path is not None:
        src = Path(input_path).expanduser().resolve()
        dst = path.resolve()
        what = None
        if src == dst:
            what = "is the input"
        elif _inside(dst, src):
            what = "is inside the input"
        elif _inside(src, dst):
            what = "contains the input"
        if what is not None:
            raise FeatureStoreError(
                f"The output {path} {what} {src}: featurize never writes over its own input. "
                "Nothing was changed; choose another output path."
            )
    if not (path.exists() or path.is_symlink()):
        return
    if path.is_dir():
        attrs = read_attrs(path)
        if attrs is not None and attrs.get("dkrp_format") == FEATURES_FORMAT:
            return
        if attrs is None and not any(path.iterdir()):
            return  # an empty directory: nothing to lose
        kind = (f"a dkrp {attrs.get('dkrp_format')} store"
                if attrs is not None and attrs.get("dkrp_format") else "a directory")
    else:
        kind = "a file"
    raise FeatureStoreError(Message(
        "{} exists and is not a dkrp feature store (it is {}); featurize (even with {}) "
        "replaces only feature stores. Nothing was changed: choose another output path, or "
        "remove it yourself.", path, kind, Param("overwrite", True)))


def plan_features(X, projector, out_path, *, overwrite=False, dtype=None, source=None,
                  fingerprint=None, chunk_rows=None, max_chunk_bytes=None,
                  labels=None, bits=False, store_dtype=None, compressor=None,
                  store=None) -> dict:
    """Check a feature-store run before anything is written or any cluster is started.

    Validates ``X`` for ``projector`` (feature count, 2-D, numeric), refuses an output
    path that is not a feature store (:func:`check_output_path`) and compares an
    existing store at ``out_path`` with this run.

    With ``overwrite=True`` a store made by another run is not touched here: the plan
    builds its replacement in the hidden sibling :func:`overwrite_sibling` (resuming it
    when an earlier run of the same job left it behind), and
    :func:`dkrp.feature_store.write_plan` swaps it in once complete.

    The rows per output chunk of a new store: ``chunk_rows`` when given; else the
    input's row chunks when their output fits ``max_chunk_bytes`` (default
    :data:`TARGET_CHUNK_BYTES`), else :func:`choose_chunk_rows` (the input is
    rechunked to match). An existing store keeps its chunk grid: resuming it with
    another explicit ``chunk_rows`` is refused (with ``overwrite=True`` its replacement
    is built on the grid asked for).

    ``labels`` (array-like of ``n_samples`` values, e.g. a dataset store's ``y``) are
    stored beside the features as array ``y`` when the plan is carried out; nothing
    of them is read here but their shape.

    ``bits``, ``store_dtype`` and ``compressor`` say how the store holds its values
    (:mod:`dkrp.feature_store.encoding`): packed sign bits of a SignProductEmbedding,
    features cast to a narrower dtype than ``dtype`` (the one they are computed in),
    and the codec of each chunk. ``max_chunk_bytes`` counts stored bytes.
    ``store`` (a :class:`~dkrp.feature_store.StoreOptions`) gives ``dtype``,
    ``chunk_rows``, ``bits``, ``store_dtype`` and ``compressor`` as one value, instead
    of those keywords (not beside them).

    Returns
    -------
    dict
        ``action`` (``"create"``, ``"resume"`` or ``"noop"`` for a finished store),
        ``path`` (the store), ``build_path`` (where chunks are written: ``path``, or its
        hidden sibling when ``replace``), ``replace`` (swap ``build_path`` in for the
        store at ``path`` once complete), ``restart`` (``build_path`` holds a store
        whose run was stopped before it recorded its input's fingerprint: it is
        removed and created afresh), ``attrs`` (the attributes the store will
        have; a new store's input fingerprint has ``edge_rows_sha256`` None, for
        :func:`~dkrp.feature_store.write_plan` to record from its first tasks), ``X``
        (validated, rows aligned with the output chunks), ``dtype`` (the
        compute dtype), ``store`` (``{"bits", "store_dtype"}``: what a chunk task
        stores),
        ``missing`` (chunks to write), ``task_memory`` (bytes one chunk task needs,
        :func:`task_memory`), ``labels`` (as given), ``edge_rows`` (the input's first
        and last rows when planning read them for the fingerprint, else None: a new
        store's run reads them) and ``seconds`` (the time planning took, counted in the
        run's time).

    Raises
    ------
    FeatureStoreMismatchError, FeatureStoreError, ValueError
        As :func:`write_features`; nothing is changed on disk.
    """
    t0 = time.perf_counter()
    path = Path(out_path).expanduser().absolute()
    input_path = (source or {}).get("path") if isinstance(source, dict) else None
    if input_path is None and fingerprint is not None:
        input_path = fingerprint.get("source_path")
    check_output_path(path, input_path=input_path)
    options = StoreOptions.given(store, where="plan_features", dtype=dtype,
                                 chunk_rows=chunk_rows, bits=bits, store_dtype=store_dtype,
                                 compressor=compressor)
    options.check_for(projector)
    chunk_rows = options.chunk_rows
    X, out_dtype = _checked_input(X, projector, options.dtype, labels, input_path)
    fingerprint, edge_rows = _fingerprint(X, source, fingerprint, path)
    k, itemsize = int(projector._n_features_out), np.dtype(out_dtype).itemsize
    stored_row = row_bytes(k, out_dtype, bits=options.bits, store_dtype=options.store_dtype)
    new_rows = new_chunk_rows(X, stored_row, chunk_rows, max_chunk_bytes)

    def against(old):
        """(old attrs, X aligned, attrs, problems) of this run against ``old`` (or None)."""
        rows = int(old.get("chunk_rows", 0)) if old is not None else new_rows
        # an explicit chunk_rows that is not the store's grid cannot resume it: refused
        # below (or, with overwrite, the replacement gets the grid asked for)
        regrid = old is not None and chunk_rows is not None and rows != new_rows
        aligned, rows = _align_rows(X, (new_rows if regrid else rows) or None)
        attrs = expected_attrs(projector, aligned, out_dtype, rows, fingerprint,
                               **options.encoding())
        old = _content_identity(old, fingerprint, source)
        problems = resume_mismatches(old, attrs) if old is not None else []
        if regrid:
            problems.append(_chunk_rows_problem(int(old.get("chunk_rows", 0)), new_rows))
        return old, aligned, attrs, problems

    def compare(store):
        """:func:`against` the feature store at ``store``, if there is one."""
        old = read_attrs(store) if store.is_dir() else None
        if old is None or old.get("dkrp_format") != FEATURES_FORMAT:
            return against(None)
        if fingerprint_pending(old):
            edges = fingerprint["edge_rows_sha256"]
            if not against(dict(old, input=dict(old["input"], edge_rows_sha256=edges)))[3]:
                # this job's run stopped before it recorded the input's first and last
                # rows: its chunks are of no known input, so the store is started afresh
                # (one round of tasks lost); another job's store is refused or replaced
                # as any other
                logger.info("%s: started afresh, its run was stopped before it recorded "
                            "its input's first and last rows", store)
                restarted.add(store)
                return against(None)
        return against(old)

    build, replace, restarted = path, False, set()
    old, aligned, attrs, problems = compare(path)
    moved = ((old or {}).get("input") or {}).get("source_path")
    if not problems and moved not in (None, fingerprint.get("source_path")):
        logger.info("%s: its input, made from %s, is read from %s (the same content)",
                    path, moved, fingerprint.get("source_path"))
    if problems and not overwrite:
        _refuse(path, old, problems, new_rows)
    sibling = overwrite_sibling(path)
    if overwrite and (problems or (old is None and sibling.exists())):
        # build the replacement beside the store; resume one that a killed run of this
        # same job left there, and discard one of another job
        build, replace = sibling, True
        old, aligned, attrs, problems = compare(sibling)
        if sibling.exists() and old is None and sibling not in restarted:
            raise FeatureStoreError(Message(
                "{} (where {} builds the new store) exists and is not a dkrp feature store. "
                "Nothing was changed; remove it yourself.", sibling, Param("overwrite", True)))
        if problems:
            logger.info("discarding %s, a replacement left by another job: %s", sibling,
                        "; ".join(problems))
            old = None
    action, missing = _action(old, attrs, build, replace)
    memory = task_memory(attrs["chunk_rows"], X.shape[1], X.dtype.itemsize, k, itemsize,
                         model_bytes(projector))
    if labels is not None:
        attrs["has_labels"] = True
    return {"action": action, "path": path, "build_path": build, "replace": replace,
            "restart": build in restarted, "attrs": attrs, "X": aligned, "dtype": out_dtype,
            "store": {"bits": options.bits, "store_dtype": options.store_dtype},
            "missing": missing,
            "task_memory": memory, "labels": labels, "edge_rows": edge_rows,
            "seconds": time.perf_counter() - t0}


def _checked_input(X, projector, dtype, labels, input_path):
    """``(X, compute dtype)`` validated for ``projector``, with rows, and one label per row."""
    X, out_dtype = prepare_input(X, projector, dtype=dtype)
    if X.shape[0] == 0:  # it would make a "complete" store of nothing
        raise InvalidInputError(f"{input_path or 'X'} has no rows (shape {X.shape}): nothing to "
                                "featurize.")
    if labels is not None and tuple(getattr(labels, "shape", (len(labels),))) != (X.shape[0],):
        raise InvalidInputError(
            f"labels have shape {getattr(labels, 'shape', (len(labels),))}, but "
            f"X has {X.shape[0]} rows: one label per row is needed.")
    return X, out_dtype


def _fingerprint(X, source, fingerprint, path):
    """``(fingerprint, edge_rows)`` of the input: the one given, else computed here.

    A new store records the input's edge rows as its run's first tasks read them
    (write_plan): nothing exists here to compare them with, so they are not read here
    (``edge_rows_sha256`` None); with a store (or its replacement) at ``path`` they are,
    and kept for the plan's caller (its scale check).
    """
    if fingerprint is not None:
        return fingerprint, None
    fingerprint = input_fingerprint(X, source=source, edge_rows=False)
    if not any(p.exists() or p.is_symlink() for p in (path, overwrite_sibling(path))):
        return fingerprint, None
    edge_rows = read_edge_rows(X)
    fingerprint["edge_rows_sha256"] = edge_rows_sha256(*edge_rows)
    return fingerprint, edge_rows


def _refuse(path, old, problems, new_rows):
    """Refuse a run over a store made by another run: an explicit ``chunk_rows`` alone
    gets its own message (how to resume), anything else names every difference."""
    started = int(old.get("chunk_rows", 0)) if old is not None else None
    if problems == [_chunk_rows_problem(started, new_rows)]:
        raise FeatureStoreMismatchError(chunk_rows_refusal(path, started, new_rows))
    raise FeatureStoreMismatchError(Message(
        "The feature store {} was made by another run: {}. Nothing was changed. Use "
        "another output path, or pass {} to replace it (the new store is built beside it "
        "and replaces it only once complete).", path, Message.join("; ", problems),
        Param("overwrite", True)), problems=problems)


def _action(old, attrs, build, replace):
    """``(action, missing chunks)``: create a new store, resume one, or nothing to do."""
    n_chunks = attrs["n_chunks"]
    if old is None:
        return "create", n_chunks
    if "compressor" not in old:
        del attrs["compressor"]  # a store written before it was recorded: unknown
    missing = int((~written_chunks(build, n_chunks)).sum())  # a deleted chunk is redone
    finished = old.get("complete") is True and missing == 0
    return ("noop" if finished and not replace else "resume"), missing


def _content_identity(old, fingerprint, source):
    """``old`` (a store's attributes, or None), its input read by content.

    A store written by an earlier dkrp hashed its input's path into ``source_sha256``;
    when this run's provenance, hashed with that store's path, gives the same hash, the
    input is the same content wherever it is now, and the store's fingerprint is taken
    as this run's (:func:`~dkrp.feature_store.format.legacy_source_sha256`).
    """
    recorded = (old or {}).get("input") or {}
    digest = recorded.get("source_sha256")
    if digest is None or digest == fingerprint.get("source_sha256"):
        return old
    if legacy_source_sha256(source, recorded.get("source_path")) != digest:
        return old
    return dict(old, input=dict(recorded, source_sha256=fingerprint.get("source_sha256")))


def chunk_rows_refusal(path, started, asked) -> Message:
    """Why a store started with ``started`` rows per chunk is not resumed with ``asked``.

    The message of :func:`plan_features`' refusal, which a dry run
    (:func:`dkrp.jobs.size_job`) reports too.
    """
    return Message(
        "The feature store {} was started with {} rows per chunk, but {} was given; a store "
        "keeps the chunk grid it was started with. Nothing was changed. To resume it, run "
        "again without {} or with {}; for {} rows per chunk, write to a new path (or pass {} "
        "to build the new store beside it and replace it once complete).", path, started,
        Param("chunk_rows", asked), Param("chunk_rows"), Param("chunk_rows", started), asked,
        Param("overwrite", True))


def _chunk_rows_problem(started, asked) -> str:
    """The mismatch of an explicit ``chunk_rows`` with the grid a store was started on."""
    return f"rows per chunk: store {started}, this run {asked}"


def model_bytes(projector) -> int:
    """Bytes of the arrays a fitted projector holds (what each worker regenerates)."""
    total = 0
    for value in vars(projector).values():
        if isinstance(value, np.ndarray):
            total += value.nbytes
        elif isinstance(value, (list, tuple)):
            total += sum(v.nbytes for v in value if isinstance(v, np.ndarray))
    return int(total)
