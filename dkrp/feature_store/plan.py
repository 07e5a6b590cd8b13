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

from .._blockwise import prepare_input
from ..errors import FeatureStoreError, FeatureStoreMismatchError
from .format import (
    FEATURES_FORMAT,
    _expected_attrs,
    _mismatches,
    _read_attrs,
    _written_chunks,
    input_fingerprint,
)

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
        rows aligned with the output chunks), ``dtype``, ``missing`` (chunks to
        write) and ``seconds`` (the time planning took, counted in the run's time).

    Raises
    ------
    FeatureStoreMismatchError, FeatureStoreError, ValueError
        As :func:`write_features`; nothing is changed on disk.
    """
    t0 = time.perf_counter()
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
        action, missing = "create", n_chunks
    else:
        missing = int((~_written_chunks(path, n_chunks)).sum())
        action = "noop" if (old.get("complete") is True and missing == 0) else "resume"
    return {"action": action, "path": path, "attrs": attrs, "X": X, "dtype": out_dtype,
            "missing": missing, "seconds": time.perf_counter() - t0}
