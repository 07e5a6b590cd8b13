"""Whole featurize jobs: from an input to a finished feature store, in one call.

This module owns :func:`featurize_to_store`, the one implementation of "open the
input, fit, plan, check the workers, write" that ``dkrp featurize``, the pipeline
scripts, the SLURM example and the demo all call, and :func:`open_input`, which
turns a dataset store, ``.npy`` or Parquet path into a dask array and its
provenance. The steps themselves live where they always did: the store format and
write protocol in :mod:`dkrp.feature_store`, the worker check in
:mod:`dkrp.parallel`, the readers in :mod:`dkrp.io`.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import NamedTuple

__all__ = ["FeaturizeResult", "featurize_to_store", "open_input"]


class FeaturizeResult(NamedTuple):
    """What :func:`featurize_to_store` returns (a tuple: ``summary, projector, action``).

    Attributes
    ----------
    summary : dict
        As :func:`dkrp.feature_store.write_features` returns it: ``path``, ``rows``,
        ``n_components``, ``dtype``, ``seconds``, ``rows_per_second``,
        ``chunks_written``, ``chunks_skipped``, ``n_chunks``.
    projector : BaseProjector
        The fitted projector (the one passed in, fitted in place if it was not).
    action : {"create", "resume", "noop"}
        What the run found to do (see :func:`dkrp.feature_store.plan_features`).
    """

    summary: dict
    projector: object
    action: str


def open_input(path):
    """A dask array and its provenance from a dataset store, ``.npy`` or Parquet file.

    Parameters
    ----------
    path : str or os.PathLike
        A dataset store made by :func:`dkrp.io.ingest` (a directory), a ``.npy``
        file, or a Parquet file (``.parquet``, ``.pq``).

    Returns
    -------
    X : dask.array.Array
    provenance : dict
        For a dataset store its ``path`` and attributes; for a file its ``path`` and
        ``sha256``. Recorded in the feature store's input fingerprint.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        ``path`` is a file of another format (the message says how to ingest it).
    """
    from . import io

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Input {path} does not exist.")
    if path.is_dir():
        ds = io.open_dataset(path)
        return ds.X, {"path": str(ds.path), **ds.attrs}
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return io.from_npy(path), {"path": str(path.absolute()),
                                   "sha256": io.file_sha256(path)}
    if suffix in (".parquet", ".pq"):
        return io.from_parquet(path), {"path": str(path.absolute()),
                                       "sha256": io.file_sha256(path)}
    raise ValueError(
        f"{path} is not a dataset store, .npy or Parquet file. Convert it first: "
        f"dkrp ingest {path} {path.with_suffix('.zarr').name}"
    )


def featurize_to_store(
    source,
    dest,
    projector,
    *,
    client=None,
    overwrite=False,
    dtype=None,
    retries=0,
    progress=True,
    check=True,
    provenance=None,
    on_plan=None,
    on_fit=None,
) -> FeaturizeResult:
    """Featurize ``source`` into the resumable feature store ``dest``: the whole job.

    Steps: open the input (:func:`open_input`); fit ``projector`` on it unless it
    is fitted (data-dependent maps make their one pass over the input, on the
    cluster); plan the run once (:func:`dkrp.feature_store.plan_features`: a store
    made by another run is refused here, before any cluster is started, and a
    finished store ends the job); check that every worker regenerates the
    projector (:func:`dkrp.parallel.check_workers`); write the missing chunks
    (:func:`dkrp.feature_store.write_plan`).

    Parameters
    ----------
    source : str, os.PathLike or dask.array.Array
        A dataset store, ``.npy`` or Parquet path (see :func:`open_input`), or a
        dask array (e.g. a preprocessed one; pass its ``provenance``).
    dest : str or os.PathLike
        The feature store directory (visible to every worker).
    projector : BaseProjector
        Fitted, or to be fitted on ``source`` here (in place).
    client : distributed.Client or callable, optional
        The cluster. A zero-argument callable returning a client is called only
        when the job needs the cluster (a data-dependent fit, or chunks to write),
        so a finished or mismatched store never starts one. Default: the current
        default client, if any, else dask's local scheduler.
    overwrite : bool, default=False
        Replace a *feature store* made by another spec, input, dtype or shape; the new
        store is built beside it and swapped in only once complete, so a failed run
        leaves the old one complete. Nothing else is ever replaced: a file, a directory
        of other files, a dataset store, or ``source`` itself is refused (overwrite or
        not) before anything runs.
    dtype : {None, "float32", "float64"}
        Output dtype (default: float32 for float32 input, else float64).
    retries : int, default=0
        More attempts for a partition's task that raises (see
        :func:`dkrp.feature_store.write_features`).
    progress : bool or callable, default=True
        As for :func:`dkrp.feature_store.write_features`.
    check : bool, default=True
        Check the workers of ``client`` (when one is used) before writing.
    provenance : dict, optional
        Provenance of ``source`` for the input fingerprint; default, for a path,
        what :func:`open_input` records, and for a dask array none.
    on_plan : callable, optional
        Called as ``on_plan(plan)`` with the plan before anything is written.
    on_fit : callable, optional
        Called as ``on_fit(projector, None)`` before the pass over the input that
        fits a data-dependent projector, and ``on_fit(projector, seconds)`` after it.

    Returns
    -------
    FeaturizeResult
        ``(summary, projector, action)``.

    Raises
    ------
    FileNotFoundError, ValueError
        No input at ``source``, an input of another format, bad input (wrong feature
        count, NaN/inf naming the partition and row) or bad parameters.
    FeatureStoreMismatchError, FeatureStoreError, PartitionError
        As :func:`dkrp.feature_store.write_features`.
    SpecError
        A worker regenerates other hyperplanes than this process.
    """
    import dask.array as da

    from ._validation import check_integer
    from .feature_store import plan_features, write_plan
    from .feature_store.plan import check_output_path
    from .parallel import check_workers

    retries = check_integer("retries", retries, minimum=0)
    if isinstance(source, (str, Path)) or hasattr(source, "__fspath__"):
        # before the input is opened or anything is fitted: never write over the input
        check_output_path(dest, input_path=source)
    if isinstance(source, da.Array):
        X = source
    elif isinstance(source, (str, Path)) or hasattr(source, "__fspath__"):
        X, opened = open_input(source)
        provenance = opened if provenance is None else provenance
    else:
        raise TypeError(
            f"source must be a dataset store, .npy or Parquet path, or a dask array; got "
            f"{type(source).__name__}. Wrap in-memory data with dask.array.from_array."
        )

    cluster = {"client": None if callable(client) else client}

    def get_client():
        if cluster["client"] is None and callable(client):
            cluster["client"] = client()
        return cluster["client"]

    if not hasattr(projector, "spec_checksum_"):  # not fitted
        if getattr(projector, "data_dependent", False):
            current = get_client()  # the pass over the input runs on the cluster
            if on_fit is not None:
                on_fit(projector, None)
            t0 = time.perf_counter()
            with _as_current(current):
                projector.fit(X)
            if on_fit is not None:
                on_fit(projector, time.perf_counter() - t0)
        else:  # the number of features (and one pass for gamma="scale")
            with _as_current(cluster["client"]):
                projector.fit(X)

    plan = plan_features(X, projector, dest, overwrite=overwrite, dtype=dtype,
                         source=provenance)
    if on_plan is not None:
        on_plan(plan)
    current = None
    if plan["action"] != "noop":
        current = get_client()
        if check and current is not None:
            check_workers(current, projector)  # the same hyperplanes everywhere, or stop
    summary = write_plan(plan, projector, client=current, progress=progress, retries=retries)
    return FeaturizeResult(summary, projector, plan["action"])


def _as_current(client):
    """``client.as_current()``, or nothing to do without a client."""
    return contextlib.nullcontext() if client is None else client.as_current()
