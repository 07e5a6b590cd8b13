"""Helpers shared by the format readers: file hashing, transparent decompression, finite checks.

This module owns how an input file is hashed for provenance (:func:`file_sha256`), how
``.bz2``/``.gz``/``.xz`` inputs are opened, the error message that names the first non-finite
value of a block, and the construction of a row-chunked dask array from a per-block reader.
It imports nothing else from :mod:`dkrp.io`.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
from pathlib import Path

import dask.array as da
import numpy as np

from ..errors import InvalidInputError

_COMPRESSION_OPENERS = {".bz2": bz2.open, ".gz": gzip.open, ".xz": lzma.open}


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


def compression_suffix(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return suffix if suffix in _COMPRESSION_OPENERS else None


def open_maybe_compressed(path: Path):
    suffix = compression_suffix(path)
    if suffix is None:
        return open(path, "rb")
    return _COMPRESSION_OPENERS[suffix](path, "rb")


def nonfinite_message(values: np.ndarray, dtype) -> str:
    if np.isnan(values).any():
        return "Input X contains NaN."
    return f"Input X contains infinity or a value too large for {np.dtype(dtype)!r}."


def check_finite_block(values, labels, source, row0, columns=None, header_lines=0):
    """Raise a ValueError naming the first non-finite row (global, 0-based) and column."""
    if values.size and not np.isfinite(values).all():
        bad = ~np.isfinite(values)
        row, col = np.argwhere(bad)[0]
        where = f"column {columns[col]!r}" if columns is not None else f"column {col}"
        line = f" (line {row0 + row + 1 + header_lines} of the file)" if header_lines else ""
        raise InvalidInputError(
            f"{source}: {nonfinite_message(values[row, col : col + 1], values.dtype)} "
            f"First at data row {row0 + row}{line}, {where}."
        )
    if labels is not None and labels.dtype.kind == "f" and not np.isfinite(labels).all():
        row = int(np.flatnonzero(~np.isfinite(labels))[0])
        line = f" (line {row0 + row + 1 + header_lines} of the file)" if header_lines else ""
        raise InvalidInputError(
            f"{source}: label at data row {row0 + row}{line} is NaN or infinite."
        )


def array_from_blocks(prefix, func, args, row_chunks, n_cols, meta, token):
    """A row-chunked dask array whose block ``b`` is ``func(*args, r0, r1)``."""
    name = f"{prefix}-{token}"
    graph = {}
    r0 = 0
    for b, rows in enumerate(row_chunks):
        graph[(name, b, 0)] = (func, *args, r0, r0 + rows)
        r0 += rows
    return da.Array(graph, name, chunks=(tuple(row_chunks), (n_cols,)), meta=meta)
