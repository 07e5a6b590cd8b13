r"""Dataset stores: ingest LIBSVM, CSV, NumPy and Parquet files into Zarr v3 and open them lazily.

This module owns dkrp's on-disk *dataset* format, its provenance record and its completion
marker, plus small readers that expose ``.npy`` and Parquet files as row-chunked dask arrays.
Everything downstream (featurizers, pipelines, the CLI) reads data through :func:`open_dataset`.

Store layout (``dkrp_format = "dataset"``, ``format_version = 1``)
------------------------------------------------------------------
A store is a Zarr v3 group::

    <dest>/zarr.json     group attributes (see below)
    <dest>/X             the samples, dense or CSR (see below)
    <dest>/y             optional labels, shape (n_samples,), chunks (chunk_rows,)

Dense ``X`` is one array of shape ``(n_samples, n_features)`` chunked by rows,
``(chunk_rows, n_features)``: all columns sit in one chunk, so row block ``b`` (rows
``b * chunk_rows`` up to ``(b + 1) * chunk_rows``) is exactly one chunk.

CSR ``X`` is a group with attributes ``format="csr"``, ``shape``, ``chunk_rows``,
``n_blocks`` and ``nnz`` holding three 2-D arrays, one row (= one Zarr chunk) per row block::

    X/indptr   int64   (n_blocks, chunk_rows + 1)  block-local indptr: starts at 0, ends at the
                                                   block's nnz; padded with that nnz past the
                                                   block's last row (only the last block is short)
    X/indices  int32   (n_blocks, capacity)        column indices of block b in [b, :nnz_b]
    X/data     dtype   (n_blocks, capacity)        values of block b in [b, :nnz_b]

``capacity`` is the largest block nnz (at least 1) and the padding is zeros, which compress to
almost nothing. Block ``b`` is read on its own: ``p = indptr[b, :rows_b + 1]``, then
``data[b, :p[-1]]`` and ``indices[b, :p[-1]]``. Each block is owned by one chunk of each array,
so blocks are written by independent tasks without overlapping writes (Zarr has no locks).

Group attributes: ``dkrp_format``, ``format_version``, ``complete``, ``n_samples``,
``n_features``, ``storage`` (``"dense"`` or ``"csr"``), ``dtype``, ``chunk_rows``, ``nnz`` (CSR
only), ``has_labels``, ``label_dtype``, ``source`` (absolute path), ``source_format``,
``source_bytes``, ``source_sha256`` and ``ingest`` (the parameters as requested).

Reliability
-----------
:func:`ingest` writes into a hidden sibling directory ``.<dest>.ingest-<random>``, writes the
attributes with ``complete: false`` first and ``complete: true`` last, and only then renames the
directory to ``dest``. An ingest that fails or is killed never leaves anything at ``dest``; a
killed one may leave the hidden sibling, which is safe to delete. Every chunk is written even
when it is all zeros (``write_empty_chunks=True``), so :func:`open_dataset` can detect deleted
chunk files instead of silently reading fill values.

Parallelism
-----------
LIBSVM files are cut into line-aligned byte ranges and parsed by dask tasks (two passes: one to
count rows, non-zeros and the largest index, one to write row blocks). The tasks run on whatever
scheduler is active: a ``distributed.Client`` (the store must then be on a shared file system),
``dask.config.set(scheduler="processes")``, or the default thread pool. scikit-learn's parser
holds the GIL, so threads give little speed-up; processes or a cluster do.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import logging
import lzma
import math
import os
import re
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
import zarr
from dask.base import tokenize
from sklearn.datasets import load_svmlight_file

__all__ = [
    "Dataset",
    "file_sha256",
    "from_npy",
    "from_parquet",
    "ingest",
    "open_dataset",
    "read_array",
]

logger = logging.getLogger(__name__)

#: Target size of one uncompressed chunk of ``X`` when ``chunk_rows`` is not given.
TARGET_CHUNK_BYTES = 64 * 2**20

DATASET_FORMAT = "dataset"
FORMAT_VERSION = 1

_LIBSVM_SUFFIXES = {".txt", ".svm", ".libsvm", ".svmlight", ".t"}
_CSV_SUFFIXES = {".csv"}
_NPY_SUFFIXES = {".npy"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
_COMPRESSION_OPENERS = {".bz2": bz2.open, ".gz": gzip.open, ".xz": lzma.open}
_FORMATS = ("libsvm", "csv", "npy", "parquet", "idx")
# bytes.split() separators, i.e. what scikit-learn's svmlight parser treats as blank
_ASCII_WHITESPACE = np.frombuffer(b" \t\n\r\x0b\x0c", dtype=np.uint8)
_ZARR_CONFIG = {"write_empty_chunks": True}


@dataclass(frozen=True, eq=False)
class Dataset:
    """A dataset store opened lazily.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Row-chunked like the store, with known chunk sizes. For CSR stores each block is a
        ``scipy.sparse.csr_matrix`` and ``X._meta`` is one too.
    y : dask.array.Array of shape (n_samples,) or None
        Labels, chunked like ``X``; None when the store has none.
    attrs : dict
        The store's group attributes (provenance, shape, storage).
    path : pathlib.Path
        Absolute path of the store.
    """

    X: da.Array
    y: da.Array | None
    attrs: dict = field(repr=False)
    path: Path

    @property
    def is_sparse(self) -> bool:
        """Whether ``X`` is stored (and served) as CSR blocks."""
        return self.attrs.get("storage") == "csr"


# --------------------------------------------------------------------------------------------
# small helpers


def file_sha256(path, chunk_size: int = 4 * 2**20) -> str:
    """Hex SHA-256 digest of a file's bytes, read in pieces.

    Parameters
    ----------
    path : str or os.PathLike
        File to hash (hashed as stored: a ``.bz2`` file is hashed compressed).
    chunk_size : int, default=4 MiB
        Bytes read at a time.

    Returns
    -------
    str
        64 lowercase hex digits.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile(delete=False) as f:
    ...     _ = f.write(b"abc")
    >>> file_sha256(f.name)[:16]
    'ba7816bf8f01cfea'
    >>> os.remove(f.name)
    """
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()


def _compression_suffix(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return suffix if suffix in _COMPRESSION_OPENERS else None


def _open_maybe_compressed(path: Path):
    suffix = _compression_suffix(path)
    if suffix is None:
        return open(path, "rb")
    return _COMPRESSION_OPENERS[suffix](path, "rb")


def _sniff_format(path: Path) -> str | None:
    """Guess LIBSVM or CSV from the first data line (for names such as ``w8a.bz2``)."""
    with _open_maybe_compressed(path) as handle:
        head = handle.read(65536)
    for line in head.split(b"\n")[:50]:
        text = line.split(b"#", 1)[0].strip()
        if not text:
            continue
        tokens = text.split()
        if len(tokens) >= 1 and all(b":" in tok for tok in tokens[1:]) and b":" not in tokens[0]:
            if len(tokens) > 1 or b"," not in tokens[0]:
                return "libsvm"
        if b"," in text:
            return "csv"
        return None
    return None


def _resolve_format(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        fmt = fmt.lower()
        if fmt in ("svmlight", "svm"):
            fmt = "libsvm"
        if fmt not in _FORMATS:
            raise ValueError(f"fmt must be one of {_FORMATS} or None, got {fmt!r}")
        return fmt
    stem = path.with_suffix("") if _compression_suffix(path) else path
    suffix = stem.suffix.lower()
    if suffix == ".idx" or re.search(r"idx\d-ubyte$", stem.name):
        return "idx"
    for fmt_name, suffixes in (
        ("libsvm", _LIBSVM_SUFFIXES),
        ("csv", _CSV_SUFFIXES),
        ("npy", _NPY_SUFFIXES),
        ("parquet", _PARQUET_SUFFIXES),
    ):
        if suffix in suffixes:
            if fmt_name in ("npy", "parquet") and stem is not path:
                raise ValueError(f"{path}: compressed {fmt_name} files are not supported")
            return fmt_name
    sniffed = _sniff_format(path)
    if sniffed is not None:
        logger.info("%s: no known extension, content looks like %s", path, sniffed)
        return sniffed
    raise ValueError(
        f"Cannot infer the format of {path} from its name or first line; pass fmt= one of "
        f"{_FORMATS}"
    )


def _default_chunk_rows(bytes_per_row: float, n_samples: int) -> int:
    rows = max(1, int(TARGET_CHUNK_BYTES // max(bytes_per_row, 1.0)))
    return max(1, min(rows, n_samples)) if n_samples > 0 else rows


def _check_chunk_rows(chunk_rows) -> int | None:
    if chunk_rows is None:
        return None
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)):
        raise TypeError(f"chunk_rows must be a positive int or None, got {chunk_rows!r}")
    if chunk_rows <= 0:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    return int(chunk_rows)


def _row_chunks(n_samples: int, chunk_rows: int) -> tuple[int, ...]:
    if n_samples == 0:
        return (0,)
    full, rest = divmod(n_samples, chunk_rows)
    return (chunk_rows,) * full + ((rest,) if rest else ())


def _nonfinite_message(values: np.ndarray, dtype) -> str:
    if np.isnan(values).any():
        return "Input X contains NaN."
    return f"Input X contains infinity or a value too large for {np.dtype(dtype)!r}."


def _check_finite_block(values, labels, source, row0, columns=None, header_lines=0):
    """Raise a ValueError naming the first non-finite row (global, 0-based) and column."""
    if values.size and not np.isfinite(values).all():
        bad = ~np.isfinite(values)
        row, col = np.argwhere(bad)[0]
        where = f"column {columns[col]!r}" if columns is not None else f"column {col}"
        line = f" (line {row0 + row + 1 + header_lines} of the file)" if header_lines else ""
        raise ValueError(
            f"{source}: {_nonfinite_message(values[row, col : col + 1], values.dtype)} "
            f"First at data row {row0 + row}{line}, {where}."
        )
    if labels is not None and labels.dtype.kind == "f" and not np.isfinite(labels).all():
        row = int(np.flatnonzero(~np.isfinite(labels))[0])
        line = f" (line {row0 + row + 1 + header_lines} of the file)" if header_lines else ""
        raise ValueError(f"{source}: label at data row {row0 + row}{line} is NaN or infinite.")


def _create_dense(group, name, n_rows, n_cols, chunk_rows, dtype):
    if n_cols is None:
        shape, chunks = (n_rows,), (chunk_rows,)
    else:
        shape, chunks = (n_rows, n_cols), (chunk_rows, max(n_cols, 1))
    return group.create_array(
        name,
        shape=shape,
        dtype=np.dtype(dtype),
        chunks=chunks,
        fill_value=0,
        config=_ZARR_CONFIG,
    )


def _label_dtype(labels_integral: bool) -> np.dtype:
    return np.dtype("int64") if labels_integral else np.dtype("float64")


def _is_dkrp_store(path: Path) -> bool:
    meta = path / "zarr.json"
    if not meta.is_file():
        return False
    try:
        attrs = json.loads(meta.read_text()).get("attributes", {})
    except (OSError, ValueError):
        return False
    return isinstance(attrs, dict) and attrs.get("dkrp_format") == DATASET_FORMAT


def _check_dest(dest: Path, overwrite: bool) -> None:
    if not dest.exists():
        return
    if not overwrite:
        raise FileExistsError(
            f"{dest} already exists; pass overwrite=True (--overwrite on the command line) "
            "to replace it"
        )
    if not (dest.is_dir() and _is_dkrp_store(dest)):
        raise FileExistsError(
            f"Refusing to overwrite {dest}: it is not a dkrp dataset store (no zarr.json with "
            "dkrp_format='dataset'). Remove it yourself or choose another destination."
        )


def _publish(tmp: Path, dest: Path) -> None:
    """Move the finished store into place; an existing store is swapped out, then deleted."""
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:12]}")
        os.rename(dest, old)
        os.rename(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, dest)


# --------------------------------------------------------------------------------------------
# ingest


def ingest(
    source,
    dest,
    *,
    fmt: str | None = None,
    label_column: str | None = None,
    drop_columns: Sequence[str] = (),
    n_features: int | None = None,
    chunk_rows: int | None = None,
    dtype="float64",
    sparse: bool | None = None,
    overwrite: bool = False,
    zero_based: bool | str = "auto",
    parse_bytes: int | None = None,
    scheduler=None,
    labels=None,
) -> zarr.Group:
    """Convert a LIBSVM, CSV, ``.npy``, Parquet or IDX file into a dkrp dataset store (Zarr v3).

    Parameters
    ----------
    source : str or os.PathLike
        Input file. LIBSVM/svmlight text (``.txt``, ``.svm``, ``.libsvm``, ``.svmlight``, or any
        name whose first line looks like LIBSVM), optionally ``.bz2``/``.gz``/``.xz``
        compressed; CSV with a header row (compression as pandas infers it); ``.npy`` (2-D,
        numeric); Parquet (``.parquet``/``.pq``, needs ``pip install dkrp[parquet]``); IDX
        (MNIST-style ``*-idx3-ubyte`` images, optionally ``.gz``; each image becomes one row
        of raw values, unscaled).
    dest : str or os.PathLike
        Directory of the store to create.
    fmt : {"libsvm", "csv", "npy", "parquet", "idx"}, optional
        Input format; inferred from the file name (then the first line) when None.
    label_column : str, optional
        CSV/Parquet column stored as ``y``; without it no ``y`` is written. LIBSVM labels are
        always stored.
    drop_columns : sequence of str, default=()
        CSV/Parquet columns to leave out (for example ``("Id",)``).
    n_features : int, optional
        Number of features. For LIBSVM it fixes the width (indices must be below it); for the
        other formats it is checked against the data.
    chunk_rows : int, optional
        Rows per chunk (= per row block). By default one chunk holds about 64 MiB.
    dtype : str or numpy.dtype, default="float64"
        Floating dtype of the stored values.
    sparse : bool, optional
        Store ``X`` as CSR blocks. Default: True for LIBSVM input with density below 0.1,
        False otherwise. Only LIBSVM input can be stored sparse.
    overwrite : bool, default=False
        Replace an existing dkrp dataset store at ``dest``; anything else there is never removed.
    zero_based : bool or "auto", default="auto"
        LIBSVM only: whether feature indices start at 0. "auto" means 0-based if any index in
        the whole file is 0, else 1-based (the LIBSVM convention), as scikit-learn decides.
    parse_bytes : int, optional
        LIBSVM only: bytes of text per parsing task in the first pass (default: about 1/32
        of the file, between 1 and 32 MiB).
    scheduler : str, optional
        Dask scheduler for the parallel passes; default: the active one.
    labels : str or os.PathLike, optional
        IDX only: the matching ``*-idx1-ubyte`` labels file, stored as ``y``.

    Returns
    -------
    zarr.Group
        The finished store, opened read-only.

    Raises
    ------
    FileNotFoundError
        ``source`` does not exist.
    FileExistsError
        ``dest`` exists and ``overwrite`` is False, or it is not a dkrp store.
    ValueError
        Malformed input: the message names the file and the line, row or column.

    See Also
    --------
    open_dataset : open the store as dask arrays.

    Notes
    -----
    LIBSVM labels are stored as int64 when all of them are integers, else float64. CSV and
    Parquet labels keep their numeric dtype. The provenance (``source``, ``source_sha256``,
    requested parameters) is recorded in the group attributes.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> np.save(tmp / "x.npy", np.arange(12.0).reshape(4, 3))
    >>> group = ingest(tmp / "x.npy", tmp / "x.zarr", chunk_rows=2)
    >>> dict(n=group.attrs["n_samples"], d=group.attrs["n_features"], ok=group.attrs["complete"])
    {'n': 4, 'd': 3, 'ok': True}
    >>> open_dataset(tmp / "x.zarr").X.chunks
    ((2, 2), (3,))
    """
    started = time.perf_counter()
    source = Path(source).expanduser().absolute()
    dest = Path(dest).expanduser().absolute()
    if not source.exists():
        raise FileNotFoundError(f"Input file {source} does not exist")
    if not source.is_file():
        raise ValueError(f"Input {source} is not a regular file")
    fmt = _resolve_format(source, fmt)
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a floating dtype (float32 or float64), got {dtype}")
    chunk_rows = _check_chunk_rows(chunk_rows)
    if n_features is not None and (isinstance(n_features, bool) or int(n_features) < 0):
        raise ValueError(f"n_features must be a non-negative int or None, got {n_features!r}")
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    drop_columns = [drop_columns] if isinstance(drop_columns, str) else list(drop_columns)
    if fmt == "libsvm" and (label_column is not None or drop_columns):
        raise ValueError("label_column and drop_columns do not apply to LIBSVM input")
    if fmt != "libsvm" and sparse:
        raise ValueError(f"sparse=True is only supported for LIBSVM input, not {fmt}")
    if labels is not None and fmt != "idx":
        raise ValueError("labels= is for IDX input (a separate labels file); use label_column")
    if fmt == "npy" and label_column is not None:
        raise ValueError(".npy input has no named columns; label_column cannot be used")
    _check_dest(dest, overwrite)

    params = {
        "fmt": fmt,
        "label_column": label_column,
        "drop_columns": drop_columns,
        "n_features": None if n_features is None else int(n_features),
        "chunk_rows": chunk_rows,
        "dtype": dtype.name,
        "sparse": sparse,
        "zero_based": zero_based,
        "labels": None if labels is None else str(Path(labels).expanduser().absolute()),
    }
    logger.info("ingest %s (%s) -> %s", source, fmt, dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.ingest-{uuid.uuid4().hex[:12]}")
    try:
        group = zarr.open_group(str(tmp), mode="w-", zarr_format=3)
        # the completion flag is false until every chunk and attribute has been written
        group.attrs.update(
            {
                "dkrp_format": DATASET_FORMAT,
                "format_version": FORMAT_VERSION,
                "complete": False,
                "source": str(source),
                "source_format": fmt,
                "source_bytes": source.stat().st_size,
                "ingest": params,
            }
        )
        common = dict(n_features=params["n_features"], chunk_rows=chunk_rows, dtype=dtype)
        if fmt == "libsvm":
            info = _ingest_libsvm(
                source,
                tmp,
                group,
                sparse=sparse,
                zero_based=zero_based,
                parse_bytes=parse_bytes,
                scheduler=scheduler,
                **common,
            )
        elif fmt == "csv":
            info = _ingest_csv(source, group, label_column, drop_columns, **common)
        elif fmt == "npy":
            info = _ingest_npy(source, tmp, group, scheduler=scheduler, **common)
        elif fmt == "idx":
            info = _ingest_idx(source, group, labels, **common)
        else:
            info = _ingest_parquet(
                source, tmp, group, label_column, drop_columns, scheduler=scheduler, **common
            )
        info["source_sha256"] = file_sha256(source)
        group.attrs.update(info)
        group.attrs["complete"] = True  # last write: the store is whole
        _publish(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info(
        "ingested %s: %d x %d (%s) in %.2f s",
        dest,
        info["n_samples"],
        info["n_features"],
        info["storage"],
        time.perf_counter() - started,
    )
    return zarr.open_group(str(dest), mode="r")


# ----------------------------------------------------------------------------- LIBSVM


def _read_range(path: str, start: int, stop: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(start)
        return handle.read(stop - start)


def _line_aligned_bounds(path: Path, size: int, parse_bytes: int) -> list[tuple[int, int]]:
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
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


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


def _find_bad_line(path, display, start, stop, dtype, *, shift, n_features, strict_one_based):
    """Scan a byte range line by line and describe its first bad line (or return None)."""
    first_line = _count_newlines(path, start) + 1
    buf = _read_range(path, start, stop)
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
            if strict_one_based and low == 0:
                return (
                    f"{display}: line {lineno}: feature index 0 in a 1-based file "
                    f"(pass zero_based=True if indices start at 0): {shown!r}"
                )
            if n_features is not None and high - shift >= n_features:
                return (
                    f"{display}: line {lineno}: feature index {high} is out of range for "
                    f"n_features={n_features} ({'0' if shift == 0 else '1'}-based indices): "
                    f"{shown!r}"
                )
        if not (np.isfinite(X.data).all() and np.isfinite(y).all()):
            return f"{display}: line {lineno}: {_nonfinite_message(X.data, dtype)} {shown!r}"
    return None


def _scan_libsvm_piece(path: str, display: str, start: int, stop: int, dtype: str) -> dict:
    """First pass over one byte range: rows, their offsets and nnz, index range, label kind."""
    buf = _read_range(path, start, stop)
    try:
        X, y = _parse_libsvm_bytes(buf, np.dtype(dtype))
    except ValueError:
        found = _find_bad_line(
            path, display, start, stop, dtype, shift=0, n_features=None, strict_one_based=False
        )
        raise ValueError(found or f"{display}: cannot parse bytes {start}..{stop}") from None
    if not (np.isfinite(X.data).all() and np.isfinite(y).all()):
        found = _find_bad_line(
            path, display, start, stop, dtype, shift=0, n_features=None, strict_one_based=False
        )
        raise ValueError(found or f"{display}: non-finite value in bytes {start}..{stop}")
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
        "max_index": int(X.indices.max()) if X.nnz else None,
        "labels_integral": bool(np.all(y == np.round(y))),
        "n_newlines": n_newlines,
    }


def _write_libsvm_block(
    path, display, start, stop, block, n_rows, shift, n_features, dtype, storage, store, chunk_rows,
    label_dtype,
):
    """Second pass: parse the byte range of one row block and write that block's chunks."""
    X, y = _parse_libsvm_bytes(_read_range(path, start, stop), np.dtype(dtype))
    if X.shape[0] != n_rows:
        raise RuntimeError(
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
        xg = group["X"]
        capacity = xg["data"].shape[1]
        indptr = np.full(chunk_rows + 1, X.nnz, dtype=np.int64)
        indptr[: n_rows + 1] = X.indptr
        data = np.zeros(capacity, dtype=dtype)
        data[: X.nnz] = X.data
        idx = np.zeros(capacity, dtype=xg["indices"].dtype)
        idx[: X.nnz] = X.indices
        xg["indptr"][block] = indptr
        xg["data"][block] = data
        xg["indices"][block] = idx
    group["y"][r0 : r0 + n_rows] = y.astype(label_dtype)
    return X.nnz


def _ingest_libsvm(
    source, tmp, group, *, n_features, chunk_rows, dtype, sparse, zero_based, parse_bytes,
    scheduler,
):
    display = str(source)
    text_path = source
    decompressed = None
    if _compression_suffix(source):
        decompressed = tmp / "_decompressed_source.libsvm"  # inside tmp: removed on failure
        with _open_maybe_compressed(source) as src, open(decompressed, "wb") as out:
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
        raise ValueError(f"parse_bytes must be positive, got {parse_bytes}")
    bounds = _line_aligned_bounds(Path(path), size, parse_bytes)
    scan = dask.delayed(_scan_libsvm_piece, pure=True)
    pieces = dask.compute(
        *[scan(path, display, a, b, dtype.name) for a, b in bounds], scheduler=scheduler
    )
    n_samples = sum(p["n_rows"] for p in pieces)
    mins = [p["min_index"] for p in pieces if p["min_index"] is not None]
    maxs = [p["max_index"] for p in pieces if p["max_index"] is not None]
    if zero_based == "auto":
        shift = 0 if (not mins or min(mins) == 0) else 1
    else:
        shift = 0 if zero_based else 1
    for piece in pieces:  # indices that the global settings rule out: name the line
        bad_zero = shift == 1 and piece["min_index"] == 0
        too_big = (
            n_features is not None
            and piece["max_index"] is not None
            and piece["max_index"] - shift >= n_features
        )
        if bad_zero or too_big:
            found = _find_bad_line(
                path, display, piece["start"], piece["stop"], dtype, shift=shift,
                n_features=n_features, strict_one_based=shift == 1,
            )
            raise ValueError(found or f"{display}: feature index out of range")
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
        chunk_rows = _default_chunk_rows(per_row, n_samples)
    labels_integral = all(p["labels_integral"] for p in pieces)
    label_dtype = _label_dtype(labels_integral)
    n_blocks = math.ceil(n_samples / chunk_rows)
    block_nnz = np.add.reduceat(row_nnz, np.arange(0, n_samples, chunk_rows)) if n_samples else []
    logger.info(
        "%s: %d rows, %d features, nnz %d (density %.4g) -> %s, %d blocks of %d rows",
        display, n_samples, n_features, nnz, density, storage, n_blocks, chunk_rows,
    )

    if storage == "dense":
        _create_dense(group, "X", n_samples, n_features, chunk_rows, dtype)
    else:
        capacity = max(1, int(max(block_nnz, default=0)))
        xg = group.create_group("X")
        xg.attrs.update(
            {
                "format": "csr",
                "shape": [n_samples, n_features],
                "chunk_rows": chunk_rows,
                "n_blocks": n_blocks,
                "nnz": nnz,
                "layout": "one row per row block; indptr is block-local (see dkrp.io)",
            }
        )
        for name, width, arr_dtype in (
            ("indptr", chunk_rows + 1, np.dtype("int64")),
            ("indices", capacity, index_dtype),
            ("data", capacity, dtype),
        ):
            xg.create_array(
                name, shape=(n_blocks, width), dtype=arr_dtype, chunks=(1, width),
                fill_value=0, config=_ZARR_CONFIG,
            )
    _create_dense(group, "y", n_samples, None, chunk_rows, label_dtype)

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
    dask.compute(*tasks, scheduler=scheduler)
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


# ----------------------------------------------------------------------------- CSV


def _import_pandas():
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - pandas ships with the test extra
        raise ImportError(
            "Reading CSV needs pandas: pip install dkrp[parquet] (or pip install pandas)"
        ) from exc
    return pd


def _select_columns(source, columns, label_column, drop_columns, n_features):
    columns = [str(c) for c in columns]
    if label_column is not None and label_column not in columns:
        raise ValueError(
            f"{source}: label column {label_column!r} not found; available columns: {columns}"
        )
    missing = [c for c in drop_columns if c not in columns]
    if missing:
        raise ValueError(
            f"{source}: drop_columns {missing} not found; available columns: {columns}"
        )
    features = [c for c in columns if c != label_column and c not in drop_columns]
    if n_features is not None and n_features != len(features):
        raise ValueError(
            f"{source}: n_features={n_features} but the file has {len(features)} feature "
            f"columns after dropping {drop_columns} and the label: {features}"
        )
    return features


def _ingest_csv(source, group, label_column, drop_columns, *, n_features, chunk_rows, dtype):
    pd = _import_pandas()
    header = pd.read_csv(source, nrows=0).columns
    features = _select_columns(source, header, label_column, drop_columns, n_features)
    n_features = len(features)
    if chunk_rows is None:
        chunk_rows = _default_chunk_rows(max(n_features, 1) * dtype.itemsize, 0)
    usecols = features + ([label_column] if label_column is not None else [])
    X = _create_dense(group, "X", 0, n_features, chunk_rows, dtype)
    y = None
    label_dtype = None
    row0 = 0
    # Sequential: each pandas chunk is exactly one Zarr chunk, written once.
    with pd.read_csv(source, usecols=usecols, chunksize=chunk_rows) as reader:
        for frame in reader:
            if len(frame) == 0:  # header-only file: pandas gives one empty object frame
                continue
            bad = [c for c in usecols if not pd.api.types.is_numeric_dtype(frame[c].dtype)]
            if bad:
                raise ValueError(
                    f"{source}: non-numeric column(s) {bad} (first seen in data rows "
                    f"{row0}..{row0 + len(frame) - 1}); drop them with drop_columns="
                )
            values = frame[features].to_numpy(dtype=dtype)
            labels = None
            if label_column is not None:
                labels = frame[label_column].to_numpy()
                if label_dtype is None:
                    label_dtype = _label_dtype(labels.dtype.kind in "iub")
                    y = _create_dense(group, "y", 0, None, chunk_rows, label_dtype)
                if labels.dtype.kind == "f" and label_dtype.kind != "f":
                    raise ValueError(
                        f"{source}: label column {label_column!r} turns non-integer (or has "
                        f"missing values) in data rows {row0}..{row0 + len(frame) - 1}"
                    )
            _check_finite_block(values, labels, source, row0, features, header_lines=1)
            row1 = row0 + len(frame)
            X.resize((row1, n_features))
            X[row0:row1] = values
            if y is not None:
                y.resize((row1,))
                y[row0:row1] = labels.astype(label_dtype)
            row0 = row1
    if label_column is not None and y is None:  # empty file: still record an empty y
        label_dtype = np.dtype("float64")
        _create_dense(group, "y", 0, None, chunk_rows, label_dtype)
    return {
        "n_samples": row0,
        "n_features": n_features,
        "storage": "dense",
        "dtype": dtype.name,
        "chunk_rows": chunk_rows,
        "has_labels": label_column is not None,
        "label_dtype": None if label_dtype is None else label_dtype.name,
        "feature_names": features,
    }


# ----------------------------------------------------------------------------- npy / Parquet


def _open_npy(path) -> np.ndarray:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Input file {path} does not exist")
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise ValueError(f"{path}: not a plain numeric .npy array ({exc})") from exc
    if not isinstance(arr, np.ndarray) or arr.ndim != 2:
        raise ValueError(
            f"{path}: expected a 2-D array (n_samples, n_features), got shape "
            f"{getattr(arr, 'shape', None)}"
        )
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{path}: dtype {arr.dtype} is not numeric")
    return arr


def _npy_rows(path: str, r0: int, r1: int, dtype=None) -> np.ndarray:
    arr = np.load(path, mmap_mode="r", allow_pickle=False)
    return np.array(arr[r0:r1], dtype=dtype if dtype is not None else arr.dtype)


def _copy_block(reader, reader_args, r0, r1, store, dtype, label_dtype, display, columns):
    values, labels = reader(*reader_args, r0, r1)
    values = np.asarray(values, dtype=dtype)
    _check_finite_block(values, labels, display, r0, columns)
    group = zarr.open_group(store, mode="r+")
    group["X"][r0:r1] = values
    if labels is not None:
        group["y"][r0:r1] = labels.astype(label_dtype)


def _npy_block(path, r0, r1):
    return _npy_rows(path, r0, r1), None


def _write_blocks(reader, reader_args, n_samples, chunk_rows, store, dtype, label_dtype,
                  display, columns, scheduler):
    copy = dask.delayed(_copy_block, pure=True)
    tasks = [
        copy(reader, reader_args, r0, min(r0 + chunk_rows, n_samples), store, dtype.name,
             label_dtype, display, columns)
        for r0 in range(0, n_samples, chunk_rows)
    ]
    dask.compute(*tasks, scheduler=scheduler)


def _ingest_npy(source, tmp, group, *, n_features, chunk_rows, dtype, scheduler):
    arr = _open_npy(source)
    n_samples, width = arr.shape
    if n_features is not None and n_features != width:
        raise ValueError(f"{source}: n_features={n_features} but the array has {width} columns")
    if chunk_rows is None:
        chunk_rows = _default_chunk_rows(max(width, 1) * dtype.itemsize, n_samples)
    _create_dense(group, "X", n_samples, width, chunk_rows, dtype)
    _write_blocks(_npy_block, (str(source),), n_samples, chunk_rows, str(tmp), dtype, None,
                  str(source), None, scheduler)
    return {
        "n_samples": int(n_samples),
        "n_features": int(width),
        "storage": "dense",
        "dtype": dtype.name,
        "chunk_rows": chunk_rows,
        "has_labels": False,
        "label_dtype": None,
    }


_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path) -> np.ndarray:
    """Read an IDX file (MNIST's format; ``.gz`` allowed) into an array of its shape.

    Raises a ValueError naming the file when the header or the length is wrong.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"IDX file {path} does not exist")
    with _open_maybe_compressed(path) as handle:
        raw = handle.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic number {raw[:4]!r})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected = header + int(np.prod(dims)) * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(
            f"{path}: IDX header says shape {dims} ({expected} bytes) but the file has "
            f"{len(raw)} bytes (truncated or corrupt)"
        )
    return np.frombuffer(raw, dtype, offset=header).reshape(dims)


def _ingest_idx(source, group, labels, *, n_features, chunk_rows, dtype):
    images = read_idx(source)
    X = images.reshape(images.shape[0], -1)
    n_samples, width = X.shape
    if n_features is not None and n_features != width:
        raise ValueError(f"{source}: n_features={n_features} but each image has {width} values")
    y = None
    if labels is not None:
        y = read_idx(Path(labels).expanduser()).reshape(-1)
        if y.shape[0] != n_samples:
            raise ValueError(
                f"{labels} holds {y.shape[0]} labels but {source} holds {n_samples} images"
            )
    if chunk_rows is None:
        chunk_rows = _default_chunk_rows(max(width, 1) * dtype.itemsize, n_samples)
    _create_dense(group, "X", n_samples, width, chunk_rows, dtype)
    if y is not None:
        label_dtype = _label_dtype(True)
        _create_dense(group, "y", n_samples, None, chunk_rows, label_dtype)
    for r0 in range(0, n_samples, chunk_rows):
        r1 = min(n_samples, r0 + chunk_rows)
        group["X"][r0:r1] = X[r0:r1].astype(dtype)
        if y is not None:
            group["y"][r0:r1] = y[r0:r1].astype(label_dtype)
    return {
        "n_samples": int(n_samples),
        "n_features": int(width),
        "storage": "dense",
        "dtype": dtype.name,
        "chunk_rows": chunk_rows,
        "has_labels": y is not None,
        "label_dtype": None if y is None else np.dtype(label_dtype).name,
        **({"labels_sha256": file_sha256(labels)} if labels is not None else {}),
    }


def _import_parquet():
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(
            "Reading Parquet files needs pyarrow: pip install dkrp[parquet]"
        ) from exc
    return pq


def _parquet_schema(path, columns, label_column=None, drop_columns=(), n_features=None):
    """Return (n_rows, feature columns, label numpy dtype) after checking names and types."""
    import pyarrow as pa

    pq = _import_parquet()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Input file {path} does not exist")
    pfile = pq.ParquetFile(path)
    schema = pfile.schema_arrow
    names = list(schema.names)
    if columns is not None:
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise ValueError(f"{path}: columns {unknown} not found; available columns: {names}")
        names = list(columns) + ([label_column] if label_column in names else [])
    features = _select_columns(path, names, label_column, drop_columns, n_features)

    def numeric(t):
        return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)

    used = features + ([label_column] if label_column is not None else [])
    bad = [c for c in used if not numeric(schema.field(c).type)]
    if bad:
        raise ValueError(
            f"{path}: non-numeric column(s) {bad} "
            f"({', '.join(str(schema.field(c).type) for c in bad)}); drop them with drop_columns="
        )
    label_dtype = None
    if label_column is not None:
        label_dtype = np.dtype(schema.field(label_column).type.to_pandas_dtype())
        label_dtype = _label_dtype(label_dtype.kind in "iub")
    return pfile.metadata.num_rows, features, label_dtype


def _parquet_rows(path, features, label_column, r0, r1, dtype="float64"):
    pq = _import_parquet()
    pfile = pq.ParquetFile(path)
    sizes = [pfile.metadata.row_group(i).num_rows for i in range(pfile.num_row_groups)]
    ends = np.cumsum(sizes)
    begins = ends - np.asarray(sizes)
    groups = [i for i in range(len(sizes)) if begins[i] < r1 and ends[i] > r0]
    cols = list(features) + ([label_column] if label_column is not None else [])
    if not groups:
        values = np.empty((0, len(features)), dtype=dtype)
        return values, (np.empty(0) if label_column is not None else None)
    table = pfile.read_row_groups(groups, columns=cols)
    table = table.slice(r0 - int(begins[groups[0]]), r1 - r0)
    values = np.empty((r1 - r0, len(features)), dtype=dtype)
    for j, name in enumerate(features):
        # nulls come back as NaN and are reported by the finite check
        values[:, j] = table.column(name).to_numpy()
    labels = table.column(label_column).to_numpy() if label_column is not None else None
    return values, labels


def _ingest_parquet(source, tmp, group, label_column, drop_columns, *, n_features, chunk_rows,
                    dtype, scheduler):
    n_samples, features, label_dtype = _parquet_schema(
        source, None, label_column, drop_columns, n_features
    )
    width = len(features)
    if chunk_rows is None:
        chunk_rows = _default_chunk_rows(max(width, 1) * dtype.itemsize, n_samples)
    _create_dense(group, "X", n_samples, width, chunk_rows, dtype)
    if label_column is not None:
        _create_dense(group, "y", n_samples, None, chunk_rows, label_dtype)
    _write_blocks(
        _parquet_rows, (str(source), features, label_column), n_samples, chunk_rows, str(tmp),
        dtype, None if label_dtype is None else label_dtype.name, str(source), features,
        scheduler,
    )
    return {
        "n_samples": int(n_samples),
        "n_features": width,
        "storage": "dense",
        "dtype": dtype.name,
        "chunk_rows": chunk_rows,
        "has_labels": label_column is not None,
        "label_dtype": None if label_dtype is None else label_dtype.name,
        "feature_names": features,
    }


# --------------------------------------------------------------------------------------------
# readers


def _array_from_blocks(prefix, func, args, row_chunks, n_cols, meta, token):
    """A row-chunked dask array whose block ``b`` is ``func(*args, r0, r1)``."""
    name = f"{prefix}-{token}"
    graph = {}
    r0 = 0
    for b, rows in enumerate(row_chunks):
        graph[(name, b, 0)] = (func, *args, r0, r0 + rows)
        r0 += rows
    return da.Array(graph, name, chunks=(tuple(row_chunks), (n_cols,)), meta=meta)


def from_npy(path, chunk_rows: int | None = None) -> da.Array:
    """A 2-D ``.npy`` file as a row-chunked dask array (memory-mapped, read per block).

    Parameters
    ----------
    path : str or os.PathLike
        A 2-D numeric ``.npy`` file (pickled object arrays are refused).
    chunk_rows : int, optional
        Rows per block; default about 64 MiB per block.

    Returns
    -------
    dask.array.Array of shape (n_samples, n_features)
        Same dtype as the file, known chunks; each task opens the file itself, so the graph
        holds only the path.
    """
    path = Path(path).expanduser().absolute()
    arr = _open_npy(path)
    chunk_rows = _check_chunk_rows(chunk_rows) or _default_chunk_rows(
        max(arr.shape[1], 1) * arr.dtype.itemsize, arr.shape[0]
    )
    token = tokenize(str(path), os.stat(path).st_mtime_ns, arr.shape, str(arr.dtype), chunk_rows)
    return _array_from_blocks(
        "from-npy", _npy_rows, (str(path),), _row_chunks(arr.shape[0], chunk_rows),
        arr.shape[1], np.empty((0, arr.shape[1]), dtype=arr.dtype), token,
    )


def _parquet_values(path, features, dtype, r0, r1):
    values, _ = _parquet_rows(path, features, None, r0, r1, dtype)
    return values


def from_parquet(path, columns=None, chunk_rows: int | None = None, dtype="float64") -> da.Array:
    """Numeric Parquet columns as a row-chunked dask array.

    Parameters
    ----------
    path : str or os.PathLike
        Parquet file.
    columns : list of str, optional
        Columns to read, in order; default all (all must be numeric or boolean).
    chunk_rows : int, optional
        Rows per block; default about 64 MiB per block.
    dtype : str or numpy.dtype, default="float64"
        dtype of the result (nulls become NaN, so keep it floating if there may be nulls).

    Returns
    -------
    dask.array.Array of shape (n_rows, n_columns)
        Known chunks; each task reads the row groups that overlap its rows.

    Raises
    ------
    ImportError
        pyarrow is missing (``pip install dkrp[parquet]``).
    ValueError
        Unknown or non-numeric columns.
    """
    path = Path(path).expanduser().absolute()
    dtype = np.dtype(dtype)
    n_rows, features, _ = _parquet_schema(path, columns)
    chunk_rows = _check_chunk_rows(chunk_rows) or _default_chunk_rows(
        max(len(features), 1) * dtype.itemsize, n_rows
    )
    token = tokenize(str(path), os.stat(path).st_mtime_ns, features, dtype.name, chunk_rows)
    return _array_from_blocks(
        "from-parquet", _parquet_values, (str(path), features, dtype.name),
        _row_chunks(n_rows, chunk_rows), len(features), np.empty((0, len(features)), dtype=dtype),
        token,
    )


def read_array(path, *, columns=None, chunk_rows: int | None = None) -> da.Array:
    """Open ``.npy``, Parquet or a dkrp dataset store as a row-chunked dask array.

    Parameters
    ----------
    path : str or os.PathLike
        ``*.npy``, ``*.parquet``/``*.pq``, or a dataset store directory (its ``X``).
    columns : list of str, optional
        Parquet only: columns to read.
    chunk_rows : int, optional
        Rows per block for ``.npy``/Parquet; a store keeps its own chunks.

    Returns
    -------
    dask.array.Array
    """
    path = Path(path).expanduser().absolute()
    suffix = path.suffix.lower()
    if suffix in _NPY_SUFFIXES:
        return from_npy(path, chunk_rows=chunk_rows)
    if suffix in _PARQUET_SUFFIXES:
        return from_parquet(path, columns=columns, chunk_rows=chunk_rows)
    if path.is_dir():
        return open_dataset(path).X
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    raise ValueError(
        f"{path}: read_array reads .npy, .parquet/.pq or a dataset store directory; "
        "ingest other formats first with dkrp.io.ingest"
    )


def _read_csr_block(xpath, block, rows, n_features, r0=None, r1=None):
    group = zarr.open_group(xpath, mode="r")
    indptr = np.asarray(group["indptr"][block, : rows + 1])
    nnz = int(indptr[-1])
    capacity = group["data"].shape[1]
    if indptr[0] != 0 or nnz > capacity or np.any(np.diff(indptr) < 0):
        raise ValueError(f"Dataset store {xpath} is corrupt: block {block} has a bad indptr")
    data = np.asarray(group["data"][block, :nnz])
    indices = np.asarray(group["indices"][block, :nnz])
    if nnz and (indices.min() < 0 or indices.max() >= n_features):
        raise ValueError(f"Dataset store {xpath} is corrupt: block {block} has bad indices")
    return sp.csr_matrix((data, indices, indptr), shape=(rows, n_features))


def _corrupt(path, what) -> ValueError:
    return ValueError(
        f"Dataset store {path} is corrupt: {what}. Re-create it with "
        "dkrp.io.ingest(..., overwrite=True)."
    )


def _member(group, name, path):
    try:
        return group[name]
    except Exception as exc:  # zarr raises KeyError or metadata errors
        raise _corrupt(path, f"member {name!r} is missing or unreadable ({exc!r})") from exc


def _check_chunks_present(array, path, name):
    expected = array.nchunks
    present = array.nchunks_initialized
    if present != expected:
        raise _corrupt(path, f"array {name!r} has {present} of {expected} chunks on disk")


def open_dataset(path, *, allow_incomplete: bool = False) -> Dataset:
    """Open a dataset store made by :func:`ingest` as lazy dask arrays.

    Parameters
    ----------
    path : str or os.PathLike
        Store directory.
    allow_incomplete : bool, default=False
        Open a store whose ``complete`` flag is not true (for inspection only: its contents
        may be partial).

    Returns
    -------
    Dataset
        ``X`` (dense or CSR blocks, chunked like the store), ``y`` (or None), ``attrs``,
        ``path``.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        ``path`` is not a dkrp dataset store, is corrupt (missing metadata or chunk files,
        inconsistent shapes) or is incomplete.

    Examples
    --------
    >>> import tempfile, pathlib, numpy as np
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> np.save(tmp / "x.npy", np.eye(3))
    >>> _ = ingest(tmp / "x.npy", tmp / "x.zarr")
    >>> bool((open_dataset(tmp / "x.zarr").X.compute() == np.eye(3)).all())
    True
    """
    path = Path(path).expanduser().absolute()
    if not path.exists():
        raise FileNotFoundError(
            f"No dataset store at {path}: the path does not exist. Create one with "
            f"dkrp.io.ingest(source, {str(path)!r})."
        )
    if not (path / "zarr.json").is_file():
        raise ValueError(f"{path} is not a dkrp dataset store: it has no zarr.json")
    try:
        group = zarr.open_group(str(path), mode="r")
        attrs = dict(group.attrs)
    except Exception as exc:
        raise ValueError(
            f"{path} is not a dkrp dataset store: it is not a readable Zarr v3 group ({exc!r})"
        ) from exc
    if attrs.get("dkrp_format") != DATASET_FORMAT:
        raise ValueError(
            f"{path} is not a dkrp dataset store: attribute dkrp_format is "
            f"{attrs.get('dkrp_format')!r}, expected {DATASET_FORMAT!r}"
        )
    if attrs.get("complete") is not True and not allow_incomplete:
        raise ValueError(
            f"Dataset store {path} is incomplete: its ingest did not finish (attribute "
            "'complete' is not true). Ingest cannot resume; re-run it with overwrite=True "
            "(--overwrite) to rebuild the store, or pass allow_incomplete=True to open it anyway."
        )
    required = ("n_samples", "n_features", "storage", "chunk_rows", "has_labels")
    missing = [k for k in required if k not in attrs]
    if missing:
        raise _corrupt(path, f"attributes {missing} are missing")
    n_samples, n_features = int(attrs["n_samples"]), int(attrs["n_features"])
    chunk_rows = int(attrs["chunk_rows"])
    row_chunks = _row_chunks(n_samples, chunk_rows)
    x_member = _member(group, "X", path)

    if attrs["storage"] == "dense":
        if not isinstance(x_member, zarr.Array):
            raise _corrupt(path, "'X' should be an array for dense storage")
        if x_member.shape != (n_samples, n_features):
            raise _corrupt(
                path, f"X has shape {x_member.shape}, attributes say {(n_samples, n_features)}"
            )
        if x_member.chunks[0] != chunk_rows:
            raise _corrupt(path, f"X has row chunks {x_member.chunks[0]}, expected {chunk_rows}")
        _check_chunks_present(x_member, path, "X")
        X = da.from_zarr(x_member, chunks=(chunk_rows, max(n_features, 1)))
    elif attrs["storage"] == "csr":
        if not isinstance(x_member, zarr.Group) or x_member.attrs.get("format") != "csr":
            raise _corrupt(path, "'X' should be a group with attribute format='csr'")
        n_blocks = len(row_chunks) if n_samples else 0
        arrays = {}
        for name, width in (("indptr", chunk_rows + 1), ("indices", None), ("data", None)):
            arr = _member(x_member, name, path / "X")
            if not isinstance(arr, zarr.Array) or arr.ndim != 2 or arr.shape[0] != n_blocks:
                raise _corrupt(path, f"X/{name} should be a 2-D array with {n_blocks} rows")
            if width is not None and arr.shape[1] != width:
                raise _corrupt(path, f"X/{name} has width {arr.shape[1]}, expected {width}")
            _check_chunks_present(arr, path, f"X/{name}")
            arrays[name] = arr
        if arrays["data"].shape != arrays["indices"].shape:
            raise _corrupt(path, "X/data and X/indices have different shapes")
        dtype = arrays["data"].dtype
        xpath = str(path / "X")
        meta = sp.csr_matrix((0, n_features), dtype=dtype)
        token = tokenize(str(path), attrs.get("source_sha256"), n_samples, n_features,
                         chunk_rows, os.stat(path / "X" / "zarr.json").st_mtime_ns)
        name = f"open-csr-{token}"
        graph = {}
        if n_blocks:
            for b, rows in enumerate(row_chunks):
                graph[(name, b, 0)] = (_read_csr_block, xpath, b, rows, n_features)
        else:
            graph[(name, 0, 0)] = (sp.csr_matrix, (0, n_features))
        X = da.Array(graph, name, chunks=(row_chunks, (n_features,)), meta=meta, dtype=dtype)
    else:
        raise _corrupt(path, f"unknown storage {attrs['storage']!r}")

    y = None
    if attrs["has_labels"]:
        y_member = _member(group, "y", path)
        if not isinstance(y_member, zarr.Array) or y_member.shape != (n_samples,):
            raise _corrupt(path, f"y should be an array of shape {(n_samples,)}")
        _check_chunks_present(y_member, path, "y")
        y = da.from_zarr(y_member, chunks=(chunk_rows,))
    return Dataset(X=X, y=y, attrs=attrs, path=path)

