"""The dask path of every projector: featurize row blocks by broadcasting a spec.

* :func:`featurize` maps the row blocks of a dask array through a fitted projector.
  Only the projector's JSON spec (a few hundred bytes for data-independent maps)
  travels in the task graph; each worker process rebuilds the projector from the
  spec once (:func:`dkrp._spec.rebuild` regenerates the hyperplanes and verifies
  their checksum), caches it by checksum, and maps its blocks. Graph keys are
  tokens of the spec and the input, so they are deterministic.
* :func:`fit_dask` fits a projector from a dask array: data-independent maps only
  need ``X.shape[1]`` (plus one pass for ``gamma="scale"``); data-dependent maps
  gather what they learn from in one pass.

Each block is validated on its worker: NaN and infinity are reported with
scikit-learn's wording plus the partition (block index) and global row, e.g.
``Input X contains NaN (at partition 7, local row 13, global row 7181).``
(a :class:`dkrp.errors.PartitionInputError`). A wrong number of features is
reported before any task runs.

This module never imports :mod:`dkrp.base`: projectors are reached through their
hooks, and :class:`~dkrp.base.BaseProjector` calls in here for dask input.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading

import numpy as np
import scipy.sparse as sp

from ._spec import rebuild, spec_json
from ._validation import check_finite_rows, check_float_dtype
from .errors import InvalidInputError, PartitionInputError, SpecError

logger = logging.getLogger(__name__)

__all__ = [
    "featurize",
    "fit_dask",
    "prepare_input",
    "row_offsets",
    "transform_partition",
    "spec_json",
]

# -- worker side --------------------------------------------------------------------

_PROJECTORS: dict = {}
_PROJECTORS_LOCK = threading.Lock()


def current_client():
    """The default ``distributed`` client of this process, or None (dask's local scheduler)."""
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def worker_address() -> str | None:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return None


def cached_projector(spec_text: str):
    """Rebuild (once per process) the projector of ``spec_text``; verify its checksum."""
    key = hashlib.sha256(spec_text.encode("utf-8")).hexdigest()
    est = _PROJECTORS.get(key)
    if est is not None:
        return est
    with _PROJECTORS_LOCK:
        est = _PROJECTORS.get(key)
        if est is None:
            try:
                est = rebuild(spec_text)
            except SpecError as exc:
                where = worker_address()
                host = f"worker {where}" if where else f"process {os.getpid()}"
                raise SpecError(f"On {host}: {exc}") from exc
            _PROJECTORS[key] = est
    return est


def task_threads() -> int:
    """Threads one task may use: its worker's share of the CPUs over its task threads.

    A worker's share is ``DKRP_NUM_THREADS`` when set (:func:`dkrp.parallel.
    start_local_cluster` sets it to the CPUs over the workers), else the worker's own
    thread count, which is what Dask gives a worker (distributed sets
    ``OMP_NUM_THREADS=1`` in the workers it spawns for the same reason): one thread per
    task. Counting the machine's CPUs instead would let every worker of a plain
    ``LocalCluster`` use all of them, oversubscribing the machine by the number of
    workers. Outside a worker: :func:`dkrp._threading.num_threads`.
    """
    from ._threading import configured_threads, num_threads

    try:
        from distributed import get_worker

        nthreads = max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return num_threads()
    share = configured_threads()
    return 1 if share is None else max(1, share // nthreads)


def transform_partition(block, spec_text, dtype, row_offset, partition, output="features",
                        checked=False):
    """Featurize one row block (module-level and pure, so it pickles by reference).

    Parameters
    ----------
    block : ndarray or CSR matrix of shape (n_rows, n_features)
    spec_text : str
        JSON spec of the projector.
    dtype : str
        Output (and compute) dtype, ``"float32"`` or ``"float64"``.
    row_offset : int
        Global index of the block's first row, named in errors.
    partition : int
        Index of the block, named in errors.
    output : str, default="features"
        Which of the map's :attr:`~dkrp.base.BaseProjector.outputs` to compute in
        ``dtype`` (``"bits"``: SignProductEmbedding's packed sign bits).
    checked : bool, default=False
        The caller has already refused non-finite values in a block holding these rows
        (:func:`dkrp._validation.check_finite_rows`): they are not scanned again.

    Returns
    -------
    ndarray of shape (n_rows, n_components) and dtype ``dtype``
        Or what ``output`` is (:meth:`~dkrp.base.BaseProjector.output_spec`): packed
        bits are uint8 of shape (n_rows, ceil(n_components / 8)).
    """
    from ._threading import limit_threads

    est = cached_projector(spec_text)
    dtype = np.dtype(dtype)
    if sp.issparse(block):
        block = sp.csr_matrix(block) if block.format != "csr" else block
        if block.dtype != dtype:
            block = block.astype(dtype)
    else:
        block = np.asarray(block)
        if block.dtype != dtype:
            block = block.astype(dtype)
    if block.ndim != 2 or block.shape[1] != est.n_features_in_:
        raise PartitionInputError(
            f"Partition {partition} has shape {block.shape}, but {type(est).__name__} is "
            f"expecting {est.n_features_in_} features as input.",
            partition=partition,
        )
    if not checked:
        check_finite_rows(block, row_offset=int(row_offset), partition=int(partition))
    with limit_threads(task_threads()):
        out = est.output_block(block, output)
    return np.ascontiguousarray(out, dtype=est.output_spec(output, dtype)[1])


def _map_block(block, spec_text, dtype, offsets, output="features", block_info=None):
    # map_blocks hands us the block index; offsets[i] is its global first row.
    i = block_info[0]["chunk-location"][0] if block_info else 0
    return transform_partition(block, spec_text, dtype, offsets[i], i, output)


# -- client side ---------------------------------------------------------------------


def output_dtype(X, dtype):
    if dtype is not None:
        return check_float_dtype(dtype)
    return np.dtype(np.float32) if X.dtype == np.float32 else np.dtype(np.float64)


def prepare_input(X, projector, *, dtype=None):
    """Validate a dask array for ``projector`` before any task runs.

    Checks that ``X`` is 2-D, numeric, with known row chunks and the number of
    features the projector was fitted on, and rechunks it to one column block.

    Returns
    -------
    X : dask.array.Array
        One column block, same row chunks.
    dtype : numpy.dtype
        Output dtype (float32 input stays float32 unless ``dtype`` says otherwise).
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(projector, "spec_checksum_")
    if X.ndim != 2:
        raise InvalidInputError(
            f"Expected 2D array, got {X.ndim}D array instead: featurize takes a dask array "
            "of shape (n_samples, n_features)."
        )
    if X.dtype.kind not in "biuf":
        raise InvalidInputError(
            f"dtype={X.dtype} is not numeric: dkrp featurizes integer or floating input only."
        )
    if any(np.isnan(c) for c in X.chunks[0]) or any(np.isnan(c) for c in X.chunks[1]):
        raise InvalidInputError(
            "X has unknown chunk sizes; call X.compute_chunk_sizes() (or read it with "
            "dkrp.io.open_dataset, which records them) before featurizing."
        )
    n_features = int(X.shape[1])
    if n_features != projector.n_features_in_:
        # scikit-learn's wording (validate_data, reset=False)
        raise InvalidInputError(
            f"X has {n_features} features, but {type(projector).__name__} is expecting "
            f"{projector.n_features_in_} features as input."
        )
    if len(X.chunks[1]) != 1:
        X = X.rechunk({1: -1})
    return X, output_dtype(X, dtype)


def row_offsets(chunks) -> tuple:
    """Global first row of each row block."""
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64))


def featurize(X, projector, *, dtype=None, output="features"):
    """Featurize a dask array lazily, one task per row block.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Dense or CSR blocks, known row chunks.
    projector : BaseProjector
        A fitted projector; only its JSON spec enters the graph.
    dtype : {None, "float32", "float64"}
        Compute (and features') dtype; by default float32 input gives float32, anything
        else float64.
    output : str, default="features"
        Which of the projector's ``outputs`` to compute (``"bits"``: the packed sign
        bits of a SignProductEmbedding, uint8).

    Returns
    -------
    Z : dask.array.Array of shape (n_samples, n_components)
        Same row chunks as ``X``, one column block, dense blocks (``output``'s width
        and dtype for another output).

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> from dkrp import PolynomialRandomProjection
    >>> X = da.from_array(np.random.default_rng(0).standard_normal((10, 4)), chunks=(4, 4))
    >>> krp = PolynomialRandomProjection(n_components=8, n_hyperplanes=16, random_state=0)
    >>> Z = featurize(X, krp.fit_n_features(4))
    >>> Z.chunks
    ((4, 4, 2), (8,))
    >>> bool(np.allclose(Z.compute(), krp.transform(X.compute())))
    True
    """
    import dask.array as da
    from dask.base import tokenize

    X, compute_dtype = prepare_input(X, projector, dtype=dtype)
    k, out_dtype = projector.output_spec(output, compute_dtype)
    text = spec_json(projector)
    offsets = row_offsets(X.chunks[0])
    prefix = "dkrp-featurize-" if output == "features" else f"dkrp-{output}-"
    name = prefix + tokenize(X.name, text, compute_dtype.str)
    return da.map_blocks(
        _map_block,
        X,
        text,
        compute_dtype.str,
        offsets,
        output,
        name=name,
        dtype=out_dtype,
        chunks=(X.chunks[0], (k,)),
        meta=np.empty((0, 0), dtype=out_dtype),
    )


def fit_dask(est, X):
    """Fit ``est`` from a dask array, as ``est.fit`` does for in-memory input.

    The dask array goes to the projector's ``_fit_state`` like any training input:
    data-independent maps read nothing but ``X.shape[1]`` (and, for
    ``gamma="scale"``, one pass of moments, :func:`dkrp.kernels.scale_gamma`);
    data-dependent maps gather what they learn from in one pass (landmark rows,
    ``X^T X``). Nothing else of ``X`` is computed.

    Returns
    -------
    est : BaseProjector
        Fitted.
    """
    if X.ndim != 2:
        raise InvalidInputError(f"Expected 2D array, got {X.ndim}D array instead.")
    if np.isnan(X.shape[1]) or (est.data_dependent and np.isnan(X.shape[0])):
        raise InvalidInputError(
            "X has unknown chunk sizes; call X.compute_chunk_sizes() before fitting "
            "(landmark sampling needs n_samples)."
        )
    if X.shape[1] < 1:
        raise InvalidInputError(f"0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.dtype.kind not in "fiub":
        raise InvalidInputError(f"dask array X must be numeric, got dtype {X.dtype}.")
    est.__dict__.pop("feature_names_in_", None)
    est.n_features_in_ = int(X.shape[1])
    return est._fit_validated(X, int(X.shape[1]))
