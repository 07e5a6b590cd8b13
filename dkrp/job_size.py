"""The size of a featurize job, known before anything runs: output bytes, chunks, disk.

:func:`size_job` is what ``dkrp featurize --dry-run`` prints and what
:func:`dkrp.featurize_to_store` checks the disk with; :func:`measure_featurize_rate` and
:func:`estimate_seconds` turn a timed sample into the estimate a big job announces.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import numpy as np

from .errors import CapacityError, Message, Param

__all__ = ["check_disk", "estimate_seconds", "format_bytes", "measure_featurize_rate",
           "size_job"]

logger = logging.getLogger(__name__)


def format_bytes(n) -> str:
    """``1.5 GiB``-style text for a byte count."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def _n_components(projector) -> int | None:
    if hasattr(projector, "_n_features_out") and hasattr(projector, "spec_checksum_"):
        return int(projector._n_features_out)
    k = getattr(projector, "n_components", None)
    return int(k) if isinstance(k, int) else None


def size_job(X, projector, dest, *, dtype=None, chunk_rows=None, bits=False,
             store_dtype=None, overwrite=False, store=None) -> dict:
    """Size a featurize job without fitting, computing or writing anything.

    Parameters
    ----------
    X : dask.array.Array
    projector : BaseProjector
        Fitted or not (then its ``n_components`` gives the output width).
    dest : str or os.PathLike
        The feature store; an existing one keeps its chunk grid (with ``overwrite``,
        its replacement gets the ``chunk_rows`` asked for).
    dtype, chunk_rows, bits, store_dtype, overwrite
        As for :func:`featurize_to_store`.
    store : StoreOptions, optional
        ``dtype``, ``chunk_rows``, ``bits`` and ``store_dtype`` (and the compressor,
        which does not change the sizes before compression) as one value
        (:class:`~dkrp.feature_store.StoreOptions`), instead of those keywords.

    Returns
    -------
    dict
        ``shape`` (n_samples, n_components), ``dtype`` (as stored), ``bits``, ``bytes``
        (of the output as stored, before compression),
        ``chunk_rows``, ``n_chunks``, ``rows_to_write``, ``chunks_to_write`` and
        ``bytes_to_write`` (what the run has left to write: all of it for a new store or
        with ``overwrite``, the chunks an existing store on this grid lacks otherwise),
        ``task_memory`` (bytes one task needs, without the
        projector's own arrays when it is not fitted yet), ``path`` and ``refusal``: None,
        or why the real run will refuse (an existing store started on another chunk
        grid than the ``chunk_rows`` asked for, without ``overwrite``).
    """
    from ._blockwise import output_dtype
    from ._store import read_attrs
    from .feature_store.encoding import row_bytes
    from .feature_store.format import FEATURES_FORMAT
    from .feature_store.options import StoreOptions
    from .feature_store.plan import chunk_rows_refusal, model_bytes, new_chunk_rows, task_memory

    store = StoreOptions.given(store, where="size_job", dtype=dtype, chunk_rows=chunk_rows,
                               bits=bits, store_dtype=store_dtype)
    bits, store_dtype, chunk_rows = store.bits, store.store_dtype, store.chunk_rows
    path = Path(dest).expanduser().absolute()
    n, d = int(X.shape[0]), int(X.shape[1])
    k = _n_components(projector)
    out_dtype = np.dtype(output_dtype(X, store.dtype))
    stored = np.dtype(np.uint8 if bits else store_dtype or out_dtype)
    per_row = row_bytes(k or 0, out_dtype, bits=bits, store_dtype=store_dtype)
    old = read_attrs(path) if path.is_dir() else None
    refusal = None
    if old is not None and old.get("dkrp_format") == FEATURES_FORMAT:
        rows = int(old["chunk_rows"])
        asked = None if chunk_rows is None else max(1, int(chunk_rows))
        if asked is not None and asked != rows:  # as plan_features: refused, or replaced
            if overwrite:
                rows = asked
            else:
                refusal = chunk_rows_refusal(path, rows, asked)
    else:
        rows = new_chunk_rows(X, per_row, chunk_rows)
        rows = rows or (int(X.chunks[0][0]) if X.chunks[0] else 1)
    rows = max(1, min(rows, n)) if n else 1
    fitted = hasattr(projector, "spec_checksum_")
    memory = task_memory(rows, d, X.dtype.itemsize, k or 0, out_dtype.itemsize,
                         model_bytes(projector) if fitted else 0)
    n_chunks = -(-n // rows) if n else 0
    left = _rows_left(path, old, n, rows, n_chunks) if refusal is None and not overwrite \
        else n
    return {"path": str(path), "shape": (n, k), "dtype": stored.name, "bits": bool(bits),
            "bytes": None if k is None else n * per_row,
            "chunk_rows": rows, "n_chunks": n_chunks,
            "rows_to_write": left, "chunks_to_write": -(-left // rows) if left else 0,
            "bytes_to_write": None if k is None else left * per_row,
            "task_memory": memory, "refusal": refusal}


def _rows_left(path, old, n, rows, n_chunks) -> int:
    """Rows of the chunks an existing store at ``path`` (attributes ``old``) lacks, as
    its run counts them (a deleted chunk file is redone); all ``n`` when there is none,
    or it is not on this job's grid."""
    from .feature_store.format import FEATURES_FORMAT, written_chunks

    if (old is None or old.get("dkrp_format") != FEATURES_FORMAT
            or int(old.get("chunk_rows", 0)) != rows or int(old.get("n_chunks", -1)) != n_chunks
            or int(old.get("n_samples", -1)) != n):
        return n
    try:
        done = written_chunks(path, n_chunks)
    except Exception:  # noqa: BLE001 - an unreadable record: count every row as to do
        return n
    sizes = np.minimum(rows, n - rows * np.arange(n_chunks))
    return int(sizes[~done].sum())


def measure_featurize_rate(X, projector, *, dtype=None, bits=False, max_rows=1024,
                           max_bytes=32 * 2**20, min_seconds=0.2) -> dict | None:
    """Time ``projector`` on the first rows of ``X``, on one core: a calibration.

    The map (a clone, fitted on the sample unless ``projector`` is fitted) featurizes
    the sample, in one thread, until ``min_seconds`` have passed, after one untimed
    call on a few rows; reading the input and writing the output are not timed. A task
    of a featurize job does the same work on its row block, so ``rows_per_second`` is
    what one worker thread gets (:func:`estimate_seconds`).

    Parameters
    ----------
    X : dask.array.Array
    projector : BaseProjector
    dtype : {None, "float32", "float64"}
        The compute dtype, as for :func:`featurize_to_store`.
    bits : bool, default=False
        Time the packed sign bits (``--bits``) instead of the features.
    max_rows : int, default=1024
        The most rows sampled; fewer when their output would exceed ``max_bytes``.
    max_bytes : int, default=32 MiB
    min_seconds : float, default=0.2
        The sample is featurized again until this much time is measured.

    Returns
    -------
    dict or None
        ``rows_per_second`` (one thread) and ``sample_rows``; None when the sample
        could not be featurized (the job itself reports why, if it fails).
    """
    from sklearn.base import clone

    from ._blockwise import output_dtype
    from ._threading import blas_one_thread, limit_threads

    n = int(X.shape[0])
    k = _n_components(projector) or 1
    out_dtype = output_dtype(X, dtype)
    rows = max(1, min(n, int(max_rows), int(max_bytes) // max(1, k * out_dtype.itemsize)))
    try:
        sample = X[:rows].compute()
        sample = sample.astype(out_dtype) if sample.dtype != out_dtype else sample
        fitted = hasattr(projector, "spec_checksum_")
        est = projector if fitted else clone(projector).fit(sample)
        output = "bits" if bits else "features"
        with limit_threads(1), blas_one_thread():
            # untimed: a first call pays one-time costs (10x the next on rff, k=200000)
            est.output_block(sample[:8], output)
            done, t0 = 0, time.perf_counter()
            while True:
                est.output_block(sample, output)
                done += rows
                seconds = time.perf_counter() - t0
                if seconds >= min_seconds:
                    break
    except Exception as exc:  # noqa: BLE001 - an estimate is a courtesy; the job decides
        logger.info("no time estimate: the sample could not be featurized (%s)", exc)
        return None
    return {"rows_per_second": done / seconds, "sample_rows": rows}


def estimate_seconds(units, seconds_per_unit, cores) -> float:
    """Wall seconds for ``units`` tasks of ``seconds_per_unit`` each on ``cores`` cores.

    Whole waves: 13 voters on 8 cores take two voters' time, as the cluster runs them.

    Examples
    --------
    >>> estimate_seconds(13, 2.0, 8)
    4.0
    """
    if units <= 0:
        return 0.0
    return float(-(-int(units) // max(1, int(cores))) * seconds_per_unit)


def check_disk(size, dest):
    """Refuse an output that cannot fit the free space where it goes."""
    if size["bytes"] is None:
        return
    where = Path(dest).expanduser().absolute()
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    if size["bytes"] > free:
        n, k = size["shape"]
        raise CapacityError(Message(
            "The output is {} x {} {} = {}, more than the {} free at {}. Nothing was started; "
            "use fewer components ({}) or rows, float32 ({}), or another disk.", n, k,
            size["dtype"], format_bytes(size["bytes"]), format_bytes(free), where,
            Param("n_components"), Param("dtype", "float32")))
