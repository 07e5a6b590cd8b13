"""The ``ingest`` entry point: any supported file in, a finished dataset store out.

This module owns :func:`ingest` and its parameter checks, the choice of format (from ``fmt=``,
the file name, or the first data line), the table of per-format ingesters, and the one helper
that publishes a store atomically. The ingesters themselves live in :mod:`dkrp.io.libsvm`,
:mod:`dkrp.io.tabular` and :mod:`dkrp.io.arrays`; the layout they write is described in
:mod:`dkrp.io.dataset_store`.

Reliability
-----------
:func:`ingest` writes into a hidden sibling directory ``.<dest>.ingest-<random>``, writes the
attributes with ``complete: false`` first and ``complete: true`` last, and only then renames the
directory to ``dest``. An ingest that fails or is killed never leaves anything at ``dest``; a
killed one may leave the hidden sibling, which is safe to delete. Every chunk is written even
when it is all zeros (``write_empty_chunks=True``), so :func:`dkrp.io.open_dataset` can detect
deleted chunk files instead of silently reading fill values.
"""

from __future__ import annotations

import gzip
import logging
import lzma
import re
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from .._choices import INPUT_FORMATS as CHOICES_INPUT_FORMATS
from .._store import consolidate, publish_atomically, write_attrs
from ..errors import InvalidInputError, Message, Param
from ._common import compression_suffix, file_sha256, open_maybe_compressed
from .arrays import NPY_SUFFIXES, ingest_idx, ingest_npy, open_npy
from .dataset_store import (
    DATASET_FORMAT,
    FORMAT_VERSION,
    check_chunk_rows,
    is_dkrp_store,
)
from .libsvm import LIBSVM_SUFFIXES, ingest_libsvm
from .tabular import CSV_SUFFIXES, PARQUET_SUFFIXES, ingest_csv, ingest_parquet

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Ingester:
    """How one input format is recognised and ingested.

    Parameters
    ----------
    ingest : callable
        ``ingest(source, tmp, group, *, n_features, chunk_rows, dtype, **options)`` fills the
        open store ``group`` (directory ``tmp``) and returns the attributes it describes
        (``n_samples``, ``n_features``, ``storage``, ...).
    suffixes : set of str
        Lower-case file name suffixes that select this format.
    options : tuple of str
        The :func:`ingest` keywords passed on to ``ingest``.
    compressible : bool
        Whether a ``.bz2``/``.gz``/``.xz`` wrapped file is accepted.
    """

    ingest: Callable[..., dict]
    suffixes: set
    options: tuple[str, ...]
    compressible: bool


# format name -> ingester; the order is the order of `fmt` choices in messages
_INGESTERS = {
    "libsvm": _Ingester(
        ingest_libsvm, LIBSVM_SUFFIXES, ("sparse", "zero_based", "parse_bytes", "scheduler"),
        compressible=True,
    ),
    "csv": _Ingester(
        ingest_csv, CSV_SUFFIXES, ("label_column", "drop_columns", "scheduler"),
        compressible=True,
    ),
    "npy": _Ingester(ingest_npy, NPY_SUFFIXES, ("scheduler",), compressible=False),
    "parquet": _Ingester(
        ingest_parquet, PARQUET_SUFFIXES, ("label_column", "drop_columns", "scheduler"),
        compressible=False,
    ),
    "idx": _Ingester(ingest_idx, {".idx"}, ("labels",), compressible=True),
}
#: The input formats ``ingest`` reads (``--format`` on the command line; the CLI reads the
#: same tuple from dkrp._choices without importing this module)
INPUT_FORMATS = _FORMATS = tuple(_INGESTERS)
assert INPUT_FORMATS == CHOICES_INPUT_FORMATS, "dkrp._choices.INPUT_FORMATS is out of date"
# MNIST's names: train-images-idx3-ubyte, t10k-labels-idx1-ubyte (their suffix is not ".idx")
_IDX_NAME = re.compile(r"idx\d-ubyte$")


# --------------------------------------------------------------------------------------------
# choosing the format


def _sniff_format(path: Path) -> str | None:
    """Guess LIBSVM or CSV from the first data line (for names such as ``w8a.bz2``)."""
    with open_maybe_compressed(path) as handle:
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
    """The format name: ``fmt`` checked, else from the file name, else from the first line."""
    if fmt is not None:
        fmt = fmt.lower()
        if fmt in ("svmlight", "svm"):
            fmt = "libsvm"
        if fmt not in _FORMATS:
            raise InvalidInputError(f"fmt must be one of {_FORMATS} or None, got {fmt!r}")
        return fmt
    stem = path.with_suffix("") if compression_suffix(path) else path
    suffix = stem.suffix.lower()
    if _IDX_NAME.search(stem.name):
        return "idx"
    for fmt_name, ingester in _INGESTERS.items():
        if suffix in ingester.suffixes:
            if not ingester.compressible and stem is not path:
                raise InvalidInputError(f"{path}: compressed {fmt_name} files are not supported")
            return fmt_name
    sniffed = _sniff_format(path)
    if sniffed is not None:
        logger.info("%s: no known extension, content looks like %s", path, sniffed)
        return sniffed
    raise InvalidInputError(
        f"Cannot infer the format of {path} from its name or first line; pass fmt= one of "
        f"{_FORMATS}"
    )


# --------------------------------------------------------------------------------------------
# publishing


def _check_dest(dest: Path, overwrite: bool) -> None:
    if not dest.exists():
        return
    if not overwrite:
        raise FileExistsError(Message("{} already exists; pass {} to replace it", dest,
                                      Param("overwrite", True)))
    if not (dest.is_dir() and is_dkrp_store(dest)):
        raise FileExistsError(
            f"Refusing to overwrite {dest}: it is not a dkrp dataset store (no zarr.json with "
            "dkrp_format='dataset'). Remove it yourself or choose another destination."
        )


# --------------------------------------------------------------------------------------------
# ingest

#: What a truncated or corrupt .gz/.bz2/.xz file raises while it is read.
_DECOMPRESSION_ERRORS = (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile)


def _is_decompression_error(exc: BaseException) -> bool:
    """Whether ``exc`` says a compressed input is corrupt (not that reading it failed).

    A corrupt .bz2 stream raises a bare ``OSError("Invalid data stream")`` (no errno,
    unlike an I/O error of the disk), so it is told apart by its message.
    """
    return isinstance(exc, _DECOMPRESSION_ERRORS) or (
        type(exc) is OSError and exc.errno is None and str(exc) == "Invalid data stream")


def _default_dtype(source: Path, fmt: str) -> str:
    """float32 for a float32 ``.npy`` file (keep its bytes), else float64."""
    if fmt == "npy":
        if open_npy(source).dtype == np.float32:
            return "float32"
    return "float64"


def ingest(
    source,
    dest,
    *,
    fmt: str | None = None,
    label_column: str | None = None,
    drop_columns: Sequence[str] = (),
    n_features: int | None = None,
    chunk_rows: int | None = None,
    dtype=None,
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
    dtype : {None, "float32", "float64"}, default=None
        Floating dtype of the stored values. None keeps a ``.npy`` file's float32 as
        float32 (half the bytes of float64) and stores everything else as float64.
    sparse : bool, optional
        Store ``X`` as CSR blocks. Default: True for LIBSVM input with density below 0.1,
        False otherwise. Only LIBSVM input can be stored sparse.
    overwrite : bool, default=False
        Replace an existing dkrp dataset store at ``dest``; anything else there is never removed.
    zero_based : bool or "auto", default="auto"
        LIBSVM only: whether feature indices start at 0. "auto" reads a file without index 0
        as 1-based (the LIBSVM convention) and one with index 0 on at least half of its rows
        (those with any feature) as 0-based; index 0 on fewer rows raises ValueError naming
        the first such line, since a stray ``0:`` in a 1-based file would otherwise shift every
        column (scikit-learn's "auto" takes a single index 0 as 0-based). With False, any
        index 0 is an error naming its line.
    parse_bytes : int, optional
        LIBSVM only: bytes of text per parsing task in the first pass (default: about 1/32
        of the file, between 1 and 32 MiB).
    scheduler : str or distributed.Client, optional
        Dask scheduler for the parallel passes; default: the active one. CSV is parsed
        in this process unless ``scheduler`` is given; with it, on the cluster (one task
        per chunk; unquoted CSV only).
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
        Malformed input: the message names the file and the line, row or column. An input
        without rows (an empty file, a header-only CSV, a 0-row array) is refused too.

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
    >>> from dkrp.io import open_dataset
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
        raise InvalidInputError(f"Input {source} is not a regular file")
    fmt = _resolve_format(source, fmt)
    dtype = np.dtype(_default_dtype(source, fmt) if dtype is None else dtype)
    if dtype.kind != "f":
        raise InvalidInputError(f"dtype must be a floating dtype (float32 or float64), got {dtype}")
    chunk_rows = check_chunk_rows(chunk_rows)
    if n_features is not None and (isinstance(n_features, bool) or int(n_features) < 0):
        raise InvalidInputError(
            f"n_features must be a non-negative int or None, got {n_features!r}"
        )
    if zero_based not in (True, False, "auto"):
        raise InvalidInputError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    drop_columns = [drop_columns] if isinstance(drop_columns, str) else list(drop_columns)
    if fmt == "libsvm" and (label_column is not None or drop_columns):
        raise InvalidInputError("label_column and drop_columns do not apply to LIBSVM input")
    if fmt != "libsvm" and sparse:
        raise InvalidInputError(f"sparse=True is only supported for LIBSVM input, not {fmt}")
    if labels is not None and fmt != "idx":
        raise InvalidInputError(
            "labels= is for IDX input (a separate labels file); use label_column"
        )
    if fmt == "npy" and label_column is not None:
        raise InvalidInputError(".npy input has no named columns; label_column cannot be used")
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
    spec = _INGESTERS[fmt]
    options = {
        "label_column": label_column,
        "drop_columns": drop_columns,
        "sparse": sparse,
        "zero_based": zero_based,
        "parse_bytes": parse_bytes,
        "scheduler": scheduler,
        "labels": labels,
    }
    with publish_atomically(dest, "ingest") as tmp:  # dest checked by _check_dest
        group = zarr.open_group(str(tmp), mode="w-", zarr_format=3)
        # the completion flag is false until every chunk and attribute has been written
        write_attrs(
            group,
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
        try:
            info = spec.ingest(
                source, tmp, group, n_features=params["n_features"], chunk_rows=chunk_rows,
                dtype=dtype, **{name: options[name] for name in spec.options},
            )
            if info["n_samples"] == 0:  # LIBSVM, CSV, .npy and IDX say so first
                raise InvalidInputError(f"{source} holds no rows: nothing to ingest.")
            if info["n_features"] == 0:  # a store no map can featurize
                raise InvalidInputError(
                    f"{source} has no feature columns ({info['n_samples']} rows of 0 "
                    "features): nothing to ingest.")
            info["source_sha256"] = file_sha256(source)
        except (*_DECOMPRESSION_ERRORS, OSError) as exc:
            if not _is_decompression_error(exc):
                raise
            raise InvalidInputError(
                f"{source} is truncated or corrupt: reading it failed with "
                f"{type(exc).__name__}: {exc}. Check it against its published checksum "
                "(sha256sum) or fetch it again."
            ) from exc
        write_attrs(group, info)
        consolidate(tmp)  # the arrays' metadata in the root zarr.json (xarray.open_zarr)
        # reopened: the group opened before would write its metadata back without them
        group = zarr.open_group(str(tmp), mode="r+")
        group.attrs["complete"] = True  # last write: the store is whole
    logger.info(
        "ingested %s: %d x %d (%s) in %.2f s",
        dest,
        info["n_samples"],
        info["n_features"],
        info["storage"],
        time.perf_counter() - started,
    )
    return zarr.open_group(str(dest), mode="r", use_consolidated=False)
