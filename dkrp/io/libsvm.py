"""LIBSVM/svmlight text into a dataset store, parsed in parallel by dask tasks.

This module owns the LIBSVM ingester: cutting the text into line-aligned byte ranges, the
two parsing passes, the ``zero_based`` and ``n_features`` rules, the dense-or-CSR choice, and
the error messages that name the file and the line.

Parallelism
-----------
LIBSVM files are cut into line-aligned byte ranges and parsed by dask tasks (two passes: one to
count rows, non-zeros and the largest index, one to write row blocks). The tasks run on whatever
scheduler is active: a ``distributed.Client`` (the store must then be on a shared file system),
``dask.config.set(scheduler="processes")``, or the default thread pool. scikit-learn's parser
holds the GIL, so threads give little speed-up; processes or a cluster do.
"""

from __future__ import annotations

import io
import logging
import math
import os
import shutil
from pathlib import Path

import dask
import numpy as np
import scipy.sparse as sp
import zarr
from sklearn.datasets import load_svmlight_file

from .._settled import compute_settled
from ..errors import InputChangedError, InvalidInputError, Message, Param
from ._common import compression_suffix, nonfinite_message, open_maybe_compressed
from .dataset_store import (
    create_csr,
    create_dense,
    default_chunk_rows,
    stored_label_dtype,
    write_csr_block,
)

logger = logging.getLogger(__name__)

LIBSVM_SUFFIXES = {".txt", ".svm", ".libsvm", ".svmlight", ".t"}
# bytes.split() separators, i.e. what scikit-learn's svmlight parser treats as blank
_ASCII_WHITESPACE = np.frombuffer(b" \t\n\r\x0b\x0c", dtype=np.uint8)
#: zero_based="auto" reads a file as 0-based only when index 0 is on at least this share of
#: its rows with features (scikit-learn's "auto" takes one index 0 anywhere)
_ZERO_BASED_MIN_SHARE = 0.5


def read_byte_range(path: str, start: int, stop: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(start)
        return handle.read(stop - start)


def line_aligned_bounds(path: Path, size: int, parse_bytes: int) -> list[tuple[int, int]]:
    """Cut ``[0, size)`` into byte ranges that each start at the beginning of a line."""
    cuts = [0]
    with open(path, "rb") as handle:
        for target in range(parse_bytes, size, parse_bytes):
            if target <= cuts[-1]:
                continue
            handle.seek(target - 1)
            pos = target - 1
            while True:
                block = handle.read(65536)
                if not block:
                    pos = size
                    break
                hit = block.find(b"\n")
                if hit >= 0:
                    pos += hit + 1
                    break
                pos += len(block)
            if cuts[-1] < pos < size:
                cuts.append(pos)
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def _data_line_starts(buf: bytes) -> tuple[np.ndarray, int]:
    """Offsets of the lines scikit-learn parses as rows (not blank, not comment) and #lines.

    A line is a row when its first non-whitespace byte exists and is not ``#``, which is
    exactly when scikit-learn's ``line[:line.find(b'#')].split()`` is non-empty.
    """
    arr = np.frombuffer(buf, dtype=np.uint8)
    newlines = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [arr.size]))
    keep = starts < arr.size
    starts, ends = starts[keep], ends[keep]
    # position of the first non-whitespace byte at or after each line start (or the end)
    nonspace = np.append(np.flatnonzero(~np.isin(arr, _ASCII_WHITESPACE)), arr.size)
    first = nonspace[np.searchsorted(nonspace, starts)]
    padded = np.append(arr, np.uint8(ord("#")))  # so that first == arr.size reads as "#"
    is_row = (first < ends) & (padded[first] != ord("#"))
    return starts[is_row].astype(np.int64), int(newlines.size)


def _count_newlines(path: str, stop: int) -> int:
    count = 0
    with open(path, "rb") as handle:
        remaining = stop
        while remaining > 0:
            block = handle.read(min(remaining, 4 * 2**20))
            if not block:
                break
            count += block.count(b"\n")
            remaining -= len(block)
    return count


def _parse_libsvm_bytes(buf: bytes, dtype):
    """Parse LIBSVM text with raw (unshifted) indices: scikit-learn with zero_based=True."""
    X, y = load_svmlight_file(io.BytesIO(buf), dtype=dtype, zero_based=True)
    return sp.csr_matrix(X), np.asarray(y, dtype=np.float64)


def _find_bad_line(path, display, start, stop, dtype, *, shift, n_features, zero_problem=None):
    """Scan a byte range line by line and describe its first bad line (or return None).

    A line with feature index 0 is bad when ``zero_problem`` (the words that say why) is given.
    """
    first_line = _count_newlines(path, start) + 1
    buf = read_byte_range(path, start, stop)
    for k, line in enumerate(buf.split(b"\n")):
        body = line.split(b"#", 1)[0]
        if not body.split():
            continue
        lineno = first_line + k
        shown = line[:80].decode("utf-8", "replace")
        try:
            X, y = _parse_libsvm_bytes(line + b"\n", dtype)
        except ValueError as exc:
            return f"{display}: line {lineno}: malformed LIBSVM line ({exc}): {shown!r}"
        if X.nnz:
            low, high = int(X.indices.min()), int(X.indices.max())
            if zero_problem is not None and low == 0:
                return Message("{}: line {}: feature index 0 {}: {!r}", display, lineno,
                               zero_problem, shown)
            if n_features is not None and high - shift >= n_features:
                return Message("{}: line {}: feature index {} is out of range for {} ({}-based "
                               "indices): {!r}", display, lineno, high,
                               Param("n_features", n_features), "0" if shift == 0 else "1",
                               shown)
        if not (np.isfinite(X.data).all() and np.isfinite(y).all()):
            return f"{display}: line {lineno}: {nonfinite_message(X.data, dtype)} {shown!r}"
    return None


def _auto_shift(zero_rows: int, feature_rows: int) -> int | None:
    """What ``zero_based="auto"`` makes of a file: 1 (1-based), 0 (0-based) or None (unsure).

    No index 0 anywhere: 1-based, LIBSVM's convention. Index 0 on at least
    :data:`_ZERO_BASED_MIN_SHARE` of the rows that have features: 0-based. Index 0 on fewer
    rows is as likely a stray token in a 1-based file as a rare feature of a 0-based one, and
    guessing wrong shifts every column of every row, so the caller must be told.
    """
    if zero_rows == 0:
        return 1
    if zero_rows >= _ZERO_BASED_MIN_SHARE * feature_rows:
        return 0
    return None


def _scan_libsvm_piece(path: str, display: str, start: int, stop: int, dtype: str) -> dict:
    """First pass over one byte range: rows, their offsets and nnz, index range, label kind."""
    buf = read_byte_range(path, start, stop)
    try:
        X, y = _parse_libsvm_bytes(buf, np.dtype(dtype))
    except ValueError:
        found = _find_bad_line(
            path, display, start, stop, dtype, shift=0, n_features=None
        )
        raise InvalidInputError(found or f"{display}: cannot parse bytes {start}..{stop}") from None
    if not (np.isfinite(X.data).all() and np.isfinite(y).all()):
        found = _find_bad_line(
            path, display, start, stop, dtype, shift=0, n_features=None
        )
        raise InvalidInputError(found or f"{display}: non-finite value in bytes {start}..{stop}")
    row_starts, n_newlines = _data_line_starts(buf)
    if row_starts.size != X.shape[0]:  # pragma: no cover - guards our line model vs sklearn's
        raise RuntimeError(
            f"{display}: bytes {start}..{stop}: found {row_starts.size} data lines but "
            f"scikit-learn parsed {X.shape[0]} rows"
        )
    return {
        "start": start,
        "stop": stop,
        "n_rows": int(X.shape[0]),
        "row_offsets": row_starts + start,
        "row_nnz": np.diff(X.indptr).astype(np.int64),
        "min_index": int(X.indices.min()) if X.nnz else None,
        # indices are sorted and unique within a row, so each row holds index 0 at most once
        "zero_rows": int(np.count_nonzero(X.indices == 0)),
        "feature_rows": int(np.count_nonzero(np.diff(X.indptr))),
        "max_index": int(X.indices.max()) if X.nnz else None,
        "labels_integral": bool(np.all(y == np.round(y))),
        "n_newlines": n_newlines,
    }


def _write_libsvm_block(
    path, display, start, stop, block, n_rows, shift, n_features, dtype, storage, store, chunk_rows,
    label_dtype,
):
    """Second pass: parse the byte range of one row block and write that block's chunks."""
    X, y = _parse_libsvm_bytes(read_byte_range(path, start, stop), np.dtype(dtype))
    if X.shape[0] != n_rows:
        raise InputChangedError(
            f"{display} changed during ingest: block {block} has {X.shape[0]} rows, "
            f"expected {n_rows}"
        )
    indices = X.indices.astype(np.int64) - shift
    X = sp.csr_matrix((X.data, indices, X.indptr), shape=(n_rows, n_features))
    group = zarr.open_group(store, mode="r+")
    r0 = block * chunk_rows
    if storage == "dense":
        group["X"][r0 : r0 + n_rows] = X.toarray()
    else:
        write_csr_block(group["X"], block, X, chunk_rows, dtype)
    group["y"][r0 : r0 + n_rows] = y.astype(label_dtype)
    return X.nnz


def ingest_libsvm(
    source, tmp, group, *, n_features, chunk_rows, dtype, sparse, zero_based, parse_bytes,
    scheduler,
):
    display = str(source)
    text_path = source
    decompressed = None
    if compression_suffix(source):
        decompressed = tmp / "_decompressed_source.libsvm"  # inside tmp: removed on failure
        with open_maybe_compressed(source) as src, open(decompressed, "wb") as out:
            shutil.copyfileobj(src, out, 4 * 2**20)
        text_path = decompressed
        display = f"{source} (decompressed)"
    try:
        return _ingest_libsvm_text(
            str(text_path), display, str(tmp), group, n_features=n_features,
            chunk_rows=chunk_rows, dtype=dtype, sparse=sparse, zero_based=zero_based,
            parse_bytes=parse_bytes, scheduler=scheduler,
        )
    finally:
        if decompressed is not None and decompressed.exists():
            decompressed.unlink()


def _ingest_libsvm_text(
    path, display, store, group, *, n_features, chunk_rows, dtype, sparse, zero_based,
    parse_bytes, scheduler,
):
    size = os.path.getsize(path)
    if parse_bytes is None:
        parse_bytes = int(min(32 * 2**20, max(2**20, math.ceil(size / 32))))
    elif parse_bytes <= 0:
        raise InvalidInputError(f"parse_bytes must be positive, got {parse_bytes}")
    bounds = line_aligned_bounds(Path(path), size, parse_bytes)
    scan = dask.delayed(_scan_libsvm_piece, pure=True)
    pieces = dask.compute(
        *[scan(path, display, a, b, dtype.name) for a, b in bounds], scheduler=scheduler
    )
    n_samples = sum(p["n_rows"] for p in pieces)
    if n_samples == 0:
        what = "is empty" if size == 0 else "has no data lines, only blank or comment lines"
        raise InvalidInputError(f"{display} {what}: nothing to ingest.")
    maxs = [p["max_index"] for p in pieces if p["max_index"] is not None]
    zero_rows = sum(p["zero_rows"] for p in pieces)
    feature_rows = sum(p["feature_rows"] for p in pieces)
    if zero_based == "auto":
        shift = _auto_shift(zero_rows, feature_rows)
    else:
        shift = 0 if zero_based else 1
    if shift is None:
        zero_problem = Message(
            "(on {} of {} rows; the others fit 1-based indices): a stray 0 in a 1-based file, "
            "or a 0-based file? Read the wrong way, every column shifts by one. Pass {} if "
            "indices start at 0, or {} if they start at 1 (this line is then an error)",
            zero_rows, feature_rows, Param("zero_based", True), Param("zero_based", False))
    elif shift == 1:
        zero_problem = Message("in a 1-based file (pass {} if indices start at 0)",
                               Param("zero_based", True))
    else:
        zero_problem = None
    # unsure (None): the lines are checked as 1-based, so the first line with index 0 is named
    checked_shift = 1 if shift is None else shift
    for piece in pieces:  # indices that the global settings rule out: name the line
        bad_zero = zero_problem is not None and piece["min_index"] == 0
        too_big = (
            n_features is not None
            and piece["max_index"] is not None
            and piece["max_index"] - checked_shift >= n_features
        )
        if bad_zero or too_big:
            found = _find_bad_line(
                path, display, piece["start"], piece["stop"], dtype, shift=checked_shift,
                n_features=n_features, zero_problem=zero_problem,
            )
            raise InvalidInputError(found or f"{display}: feature index out of range")
    if n_features is None:
        n_features = (max(maxs) - shift + 1) if maxs else 0
    row_offsets = (
        np.concatenate([p["row_offsets"] for p in pieces]) if pieces else np.zeros(0, np.int64)
    )
    row_nnz = np.concatenate([p["row_nnz"] for p in pieces]) if pieces else np.zeros(0, np.int64)
    nnz = int(row_nnz.sum())
    cells = n_samples * n_features
    density = nnz / cells if cells else 1.0
    if sparse is None:
        sparse = bool(cells) and density < 0.1
    storage = "csr" if sparse else "dense"
    index_dtype = np.dtype("int32") if n_features < 2**31 else np.dtype("int64")
    if chunk_rows is None:
        if storage == "dense":
            per_row = n_features * dtype.itemsize
        else:
            per_row = (nnz / max(n_samples, 1)) * (dtype.itemsize + index_dtype.itemsize) + 8
        chunk_rows = default_chunk_rows(per_row, n_samples)
    labels_integral = all(p["labels_integral"] for p in pieces)
    label_dtype = stored_label_dtype(labels_integral)
    n_blocks = math.ceil(n_samples / chunk_rows)
    block_nnz = np.add.reduceat(row_nnz, np.arange(0, n_samples, chunk_rows)) if n_samples else []
    logger.info(
        "%s: %d rows, %d features, nnz %d (density %.4g) -> %s, %d blocks of %d rows",
        display, n_samples, n_features, nnz, density, storage, n_blocks, chunk_rows,
    )

    if storage == "dense":
        create_dense(group, "X", n_samples, n_features, chunk_rows, dtype)
    else:
        capacity = max(1, int(max(block_nnz, default=0)))
        create_csr(group, n_samples, n_features, chunk_rows, n_blocks, nnz, capacity,
                   index_dtype, dtype)
    create_dense(group, "y", n_samples, None, chunk_rows, label_dtype)

    write = dask.delayed(_write_libsvm_block, pure=True)
    tasks = []
    for block in range(n_blocks):
        r0 = block * chunk_rows
        r1 = min(r0 + chunk_rows, n_samples)
        start = int(row_offsets[r0])
        stop = int(row_offsets[r1]) if r1 < n_samples else size
        tasks.append(
            write(
                path, display, start, stop, block, r1 - r0, shift, n_features, dtype.name,
                storage, store, chunk_rows, label_dtype.name,
            )
        )
    compute_settled(*tasks, scheduler=scheduler)
    info = {
        "n_samples": n_samples,
        "n_features": n_features,
        "storage": storage,
        "dtype": dtype.name,
        "chunk_rows": chunk_rows,
        "has_labels": True,
        "label_dtype": label_dtype.name,
        "nnz": nnz,
        "zero_based": shift == 0,
    }
    return info
