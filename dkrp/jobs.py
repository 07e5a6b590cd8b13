"""Whole featurize jobs: from an input to a finished feature store, in one call.

This module owns :func:`featurize_to_store`, the one implementation of "open the
input, fit, plan, check the workers, write" that ``dkrp featurize``, the pipeline
scripts, the SLURM example and the demo all call, and :func:`open_input`, which
turns a dataset store, ``.npy`` or Parquet path into a dask array and its
provenance. The steps themselves live where they always did: the job's size before it
runs in :mod:`dkrp.job_size`, the store format and write protocol in
:mod:`dkrp.feature_store`, the worker check in :mod:`dkrp.parallel`, the readers in
:mod:`dkrp.io`.

A job's options travel as three frozen values, each also taken one by one as keywords:
:class:`~dkrp.feature_store.StoreOptions` (what the store holds and its chunks),
:class:`~dkrp.preprocessing.ScalingOptions` (the scaling a map fitted here learns) and
:class:`JobHooks` (progress and callbacks).

On memory: the job is sized before anything runs (:func:`size_job`), and an output
larger than the free space at the destination is refused before the fit. Once the
cluster is up, each worker's memory limit, threads and memory in use give the memory a
task may take (:func:`task_budget`); a new store's chunks are made small enough (the
input is rechunked to match), and a task that still cannot fit (``chunk_rows`` given, or
an existing store's grid) is refused naming the ``chunk_rows`` that would. Workers whose
memory in use already exceeds the pause threshold (``--memory-limit`` below what a
worker needs to start) are refused instead of leaving the job hanging.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._validation import check_integer, options_object
from .errors import CapacityError, ClusterError, InvalidInputError, InvalidTypeError, Message, Param
from .job_size import (  # estimate_seconds, measure_featurize_rate: still found here too
    check_disk,
    estimate_seconds,
    format_bytes,
    measure_featurize_rate,
    size_job,
)
from .parallel import WORKER_WAIT, worker_wait  # noqa: F401 - WORKER_WAIT: its old home

__all__ = ["FeaturizeResult", "JobHooks", "estimate_seconds", "featurize_to_store",
           "measure_featurize_rate", "open_input", "size_job", "task_budget"]

logger = logging.getLogger(__name__)


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
    """A dask array and its provenance: :func:`dkrp.io.inputs.open_input`.

    Kept here for callers of ``dkrp.jobs``; imported when called, as ``dkrp.io`` (and
    dask.array with it) is not needed to size or plan a job.
    """
    from .io.inputs import open_input as open_

    return open_(path)


@dataclasses.dataclass(frozen=True, kw_only=True)
class JobHooks:
    """How a featurize job reports to its caller: progress, and callbacks at each step.

    For :func:`featurize_to_store` (``hooks=JobHooks(...)``, or the same keywords).
    Each callback is optional; the steps call them in this order: ``on_size``,
    ``on_fit``, ``on_plan``, ``on_warning``, ``progress``.

    Parameters
    ----------
    progress : bool or callable, default=True
        True shows a tqdm bar on stderr; a callable is called as ``progress(done,
        total)`` after each chunk; False (or None) is silent (as for
        :func:`dkrp.feature_store.write_features`).
    on_size : callable, optional
        Called as ``on_size(size, measure)`` once the job is sized and the disk checked,
        before anything is fitted, started or written: ``size`` is :func:`size_job`'s
        dict, and ``measure()`` times the map on a sample of the input
        (:func:`measure_featurize_rate`, for :func:`estimate_seconds`). It may announce
        the job or ask for confirmation, and raise to stop it there (``dkrp featurize
        --confirm-above``).
    on_fit : callable, optional
        Called as ``on_fit(projector, None)`` before the pass over the input that
        fits a data-dependent projector (or learns the ``standardize`` statistics), and
        ``on_fit(projector, seconds)`` after it.
    on_plan : callable, optional
        Called as ``on_plan(plan)`` with the plan
        (:func:`dkrp.feature_store.plan_features`) before anything is written.
    on_warning : callable, optional
        Called as ``on_warning(line)`` when the input's scale, as the map sees it, is
        orders of magnitude from what a map fitted here expects
        (:func:`dkrp.methods.scale_warning`, on the first and last rows that the run
        reads for the store's fingerprint anyway). Default: logged as a warning.

    Raises
    ------
    InvalidTypeError
        A callback that is not callable (or None), or a ``progress`` that is neither a
        bool, None nor callable.
    """

    progress: object = True
    on_size: object = None
    on_fit: object = None
    on_plan: object = None
    on_warning: object = None

    def __post_init__(self):
        if not (self.progress is None or isinstance(self.progress, bool)
                or callable(self.progress)):
            raise InvalidTypeError(f"progress must be True, False, None or a callable, got "
                                   f"{type(self.progress).__name__}.")
        for name in ("on_size", "on_fit", "on_plan", "on_warning"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise InvalidTypeError(f"{name} must be a callable or None, got "
                                       f"{type(value).__name__}.")


def featurize_to_store(source, dest, projector, *, client=None, store=None, scaling=None,
                       hooks=None, overwrite=False, retries=0, check=True, provenance=None,
                       labels=None, dry_run=False, **options) -> FeaturizeResult:
    """Featurize ``source`` into the resumable feature store ``dest``: the whole job.

    Open the input (:func:`open_input`), size the job (:func:`size_job`), fit
    ``projector`` unless it is fitted (a fitted map, e.g. ``dkrp.from_spec`` of a
    training store's spec, is never refitted: that is how a test set gets the training
    map), plan the run (:func:`dkrp.feature_store.plan_features`: a store of another
    run is refused before any cluster starts), check the workers, write what is missing.

    Parameters
    ----------
    source : str, os.PathLike or dask.array.Array
        A dataset store, ``.npy`` or Parquet path (:func:`open_input`), or a dask array.
    dest : str or os.PathLike
        The feature store directory (visible to every worker).
    projector : BaseProjector
        Fitted, or to be fitted on ``source`` here (in place).
    client : distributed.Client or callable, optional
        The cluster, or a zero-argument callable making it when the job first needs it
        (default: the current client, if any, else dask's local scheduler).
    store : StoreOptions, optional
        Dtypes, packed bits, compressor and rows per chunk of the store
        (:class:`~dkrp.feature_store.StoreOptions`).
    scaling : ScalingOptions, optional
        For a map fitted here (:class:`~dkrp.preprocessing.ScalingOptions`).
    hooks : JobHooks, optional
        Progress and the callbacks of each step (:class:`JobHooks`).
    overwrite : bool, default=False
        Replace a *feature store* of another run, once its replacement (built beside
        it) is complete; nothing else (a file, a dataset store, ``source``).
    retries : int, default=0
        More attempts for a partition's task that raises (as for
        :func:`dkrp.feature_store.write_features`).
    check : bool, default=True
        Check the workers of ``client`` (when one is used) before writing.
    provenance : dict, optional
        Of ``source``, for the input fingerprint (default: a path's own, an array none).
    labels : array-like of shape (n_samples,), optional
        Stored beside the features (default: a dataset store's own).
    dry_run : bool, default=False
        Size the job and return :func:`size_job`'s dict, action ``"dry-run"``.
    **options
        The fields of ``store``, ``scaling`` and ``hooks`` as keywords (``dtype=``,
        ``bits=``, ``standardize=``, ``progress=``, ...), each one way, not both.

    Returns
    -------
    FeaturizeResult
        ``(summary, projector, action)``.

    Raises
    ------
    FileNotFoundError, InvalidInputError, InvalidTypeError
        No input, bad input (refused before the cluster starts) or bad options.
    FeatureStoreError, PartitionError, SpecError, CapacityError
        A store of another run; a failing partition; workers that regenerate another
        map; an output or task that cannot fit (see :mod:`dkrp.jobs` on memory).
    """
    store, scaling, hooks = _fold_options(store, scaling, hooks, options)
    retries = check_integer("retries", retries, minimum=0)
    fitted = _refuse_options_for(projector, store, scaling)
    X, provenance, labels = _open_source(source, dest, provenance, labels)
    _refuse_before_the_cluster(X, projector, provenance,
                               standardize=scaling.standardize and not fitted)
    size = size_job(X, projector, dest, store=store, overwrite=overwrite)
    if dry_run:
        return FeaturizeResult(size, projector, "dry-run")
    check_disk(size, dest)
    if hooks.on_size is not None:
        hooks.on_size(size, lambda: measure_featurize_rate(X, projector, dtype=store.dtype,
                                                           bits=store.bits))
    cluster = _LazyClient(client)
    if not fitted:
        _fit_here(projector, X, cluster, scaling=scaling, on_fit=hooks.on_fit)
    return _plan_and_write(X, projector, dest, cluster, store=store, overwrite=overwrite,
                           provenance=provenance, labels=labels, check=check, hooks=hooks,
                           retries=retries, check_scale=not fitted)


def _fold_options(store, scaling, hooks, options):
    """``(store, scaling, hooks)`` of :func:`featurize_to_store`: each object as given, or
    made of its fields among the keywords ``options``; a keyword beside its object, or
    one that no object has, is refused (a TypeError, as Python refuses one)."""
    from .feature_store.options import StoreOptions
    from .preprocessing import ScalingOptions

    objects = []
    for name, value, cls in (("store", store, StoreOptions),
                             ("scaling", scaling, ScalingOptions), ("hooks", hooks, JobHooks)):
        fields = [field.name for field in dataclasses.fields(cls)]
        keywords = {key: options.pop(key) for key in fields if key in options}
        objects.append(options_object(cls, value, name, keywords, where="featurize_to_store"))
    if options:
        raise InvalidTypeError(f"featurize_to_store() got an unexpected keyword argument "
                               f"{next(iter(options))!r}")
    return tuple(objects)


def _plan_and_write(X, projector, dest, cluster, *, store, overwrite, provenance, labels,
                    check, hooks, retries, check_scale):
    """The job once the map is fitted: plan the run (a finished store ends it), fit the
    plan to the workers, then write the missing chunks (the input's scale checked on
    the rows the run reads anyway, for a map fitted here)."""
    from .feature_store import plan_features, write_plan

    def make_plan(rows):
        return plan_features(X, projector, dest, overwrite=overwrite, source=provenance,
                             labels=labels, store=dataclasses.replace(store, chunk_rows=rows))

    plan = make_plan(store.chunk_rows)
    current = None
    if plan["action"] != "noop":
        current = cluster.get()
        plan = _fit_the_workers(plan, make_plan, projector, current, check=check,
                                chunk_rows=store.chunk_rows)
    if hooks.on_plan is not None:
        hooks.on_plan(plan)
    # a map brought fitted (--like, --spec) was checked when it was fitted
    scale_checker = None
    if check_scale and plan["action"] != "noop":
        scale_checker = _scale_checker(projector, hooks.on_warning)
        if plan.get("edge_rows") is not None:
            scale_checker(*plan["edge_rows"])
    summary = write_plan(plan, projector, client=current, progress=hooks.progress,
                         retries=retries, on_edge_rows=scale_checker)
    return FeaturizeResult(summary, projector, plan["action"])


class _LazyClient:
    """The job's cluster: a client, or a zero-argument callable called on first use only
    (a finished or mismatched store never starts one)."""

    def __init__(self, client):
        self._make = client if callable(client) else None
        self.client = None if callable(client) else client

    def get(self):
        if self.client is None and self._make is not None:
            self.client = self._make()
        return self.client


def _refuse_options_for(projector, store, scaling) -> bool:
    """Whether ``projector`` is fitted, once the store options it cannot store (sign bits
    of a map without them) and the scaling it cannot take are refused."""
    store.check_for(projector)
    fitted = hasattr(projector, "spec_checksum_")
    if fitted:
        _refuse_scaling_of_a_fitted_map(projector, scaling)
    return fitted


def _refuse_scaling_of_a_fitted_map(projector, scaling):
    """A fitted projector brings its own scaling: other standardize/scale_rows are refused."""
    from .preprocessing import describe

    if not scaling.asked:
        return
    asked = {"standardize": {}} if scaling.standardize else {}
    asked.update({"scale_rows": scaling.scale_rows} if scaling.scale_rows is not None else {})
    carried = getattr(projector, "preprocessing_", None)
    if describe(asked) != describe(carried):
        raise InvalidInputError(
            f"The projector is fitted (scaling: {describe(carried)}) and is used as it "
            f"is, never refitted; standardize/scale_rows ({describe(asked)}) apply only "
            "to a projector fitted here. Drop them: a fitted map brings its own scaling."
        )


def _open_source(source, dest, provenance, labels):
    """``(X, provenance, labels)`` of a path (its own provenance and labels unless given)
    or a dask array; ``dest`` is checked not to write over a path input first."""
    import dask.array as da

    from .feature_store.plan import check_output_path

    is_path = isinstance(source, (str, Path)) or hasattr(source, "__fspath__")
    if is_path:
        # before the input is opened or anything is fitted: never write over the input
        check_output_path(dest, input_path=source)
    if isinstance(source, da.Array):
        return source, provenance, labels
    if is_path:
        from .io.inputs import open_labelled_input

        X, opened, y = open_labelled_input(source)
        return X, opened if provenance is None else provenance, y if labels is None else labels
    raise InvalidTypeError(
        f"source must be a dataset store, .npy or Parquet path, or a dask array; got "
        f"{type(source).__name__}. Wrap in-memory data with dask.array.from_array."
    )


def _refuse_before_the_cluster(X, projector, provenance, *, standardize):
    """No rows, or sparse rows the map would have to centre: refused before any fit,
    cluster or store (plan_features would refuse no rows only then; the workers would
    refuse every sparse row)."""
    from .preprocessing import sparse_refusal

    where = (provenance or {}).get("path") if isinstance(provenance, dict) else None
    if X.shape[0] == 0:
        raise InvalidInputError(
            f"{where or 'X'} has no rows (shape {X.shape}): nothing to featurize."
        )
    fitted = hasattr(projector, "spec_checksum_")
    refusal = sparse_refusal(X, standardize=standardize, where=where or "X",
                             prep=getattr(projector, "preprocessing_", None) if fitted else None)
    if refusal:
        raise InvalidInputError(refusal)


def _fit_here(projector, X, cluster, *, scaling, on_fit):
    """Fit ``projector`` on ``X``: a data-dependent map (or standardize's statistics) in
    a pass over the input on the cluster, reported through ``on_fit``; any other map
    learns the number of features (and gamma="scale") without starting a cluster."""
    from .preprocessing import fit_scaled

    standardize, scale_rows = scaling.standardize, scaling.scale_rows
    if not (getattr(projector, "data_dependent", False) or standardize):
        with _as_current(cluster.client):
            fit_scaled(projector, X, scale_rows=scale_rows)
        return
    current = cluster.get()  # the pass over the input runs on the cluster
    if on_fit is not None:
        on_fit(projector, None)
    t0 = time.perf_counter()
    with _as_current(current):
        fit_scaled(projector, X, standardize=standardize, scale_rows=scale_rows)
    if on_fit is not None:
        on_fit(projector, time.perf_counter() - t0)


def _fit_the_workers(plan, make_plan, projector, client, *, check, chunk_rows):
    """The plan once the workers are known: starved workers refused, the hyperplanes
    checked on every worker, and a new store's chunks made small enough for a task to
    fit a worker's memory (a task that cannot fit otherwise is refused, naming the rows
    that would)."""
    from .parallel import check_workers

    if client is None:
        return plan
    # workers starved of memory first: they may not even answer the check
    budget = task_budget(client, type(projector).__module__)
    if check:
        check_workers(client, projector)  # the same hyperplanes everywhere, or stop
    if budget is None or plan["task_memory"] <= budget:
        return plan
    rows = _rows_for(plan, projector, budget)
    if plan["action"] != "create" or chunk_rows is not None or rows is None:
        raise CapacityError(_does_not_fit(plan, budget, rows))
    logger.info("a task of %d rows needs %s, workers have %s: %d rows per chunk",
                plan["attrs"]["chunk_rows"], format_bytes(plan["task_memory"]),
                format_bytes(budget), rows)
    return make_plan(rows)


def _scale_checker(projector, on_warning):
    """``check(*rows)``: warn (``on_warning``, else the log) when the input's scale is
    orders of magnitude from what the map expects; a courtesy that never stops a run."""
    def check_scale(*rows):
        from .methods import scale_warning

        try:
            line = scale_warning(projector, rows)
        except Exception:  # noqa: BLE001 - a courtesy check never stops a run
            logger.debug("the input's scale could not be checked", exc_info=True)
            return
        if line is not None:
            (on_warning or logger.warning)(line)

    return check_scale


def _as_current(client):
    """``client.as_current()``, or nothing to do without a client."""
    return contextlib.nullcontext() if client is None else client.as_current()


def _worker_rss(dask_worker=None):
    import psutil

    return psutil.Process().memory_info().rss



#: Memory restarts (nanny events) before the first task after which a job stops: the
#: workers cannot even start within their memory limit.
MEMORY_RESTARTS = 2


def task_budget(client, module=None, wait=None) -> float | None:
    """Bytes one task may use on the tightest worker of ``client`` (None: no limits).

    ``(pause * memory_limit - memory in use) / threads``, ``pause`` being
    ``distributed.worker.memory.pause`` (0.8 by default: a worker above it takes no
    new task). ``module`` (a dotted name, e.g. the projector's module) is imported on
    every worker first, so the memory in use counts the code a task will load
    (``import dkrp`` itself loads none of it).

    A worker that dies while asked (preempted, killed, a node lost) is waited for:
    the probe is repeated once the cluster has its workers back, for up to ``wait``
    seconds (default :data:`WORKER_WAIT`, or the dask config ``dkrp.worker-wait``).
    Only nannies' memory restarts (their ``worker-restart-memory`` events) count
    against the memory: :data:`MEMORY_RESTARTS` of them mean the workers cannot start
    within their limit.

    Raises
    ------
    MemoryError
        A worker's memory in use is already above its pause threshold, or workers were
        restarted for memory again and again: no task would ever run, the job would hang.
    ClusterError
        Workers were lost and not replaced within ``wait`` seconds.
    """
    import time

    if wait is None:
        wait = worker_wait()
    since = time.time()  # the scheduler stamps events with time.time()
    deadline = time.monotonic() + wait
    workers = client.scheduler_info(n_workers=-1)["workers"]
    wanted = len(workers)
    limit = max((info.get("memory_limit") or 0 for info in workers.values()), default=0)
    while True:
        budget, died = _probe_budget(client, module)
        if not died:
            return budget
        lost = ", ".join(sorted(died))
        first = next(iter(died.values()))
        while True:
            restarts = _memory_restarts(client, since)
            if len(restarts) >= MEMORY_RESTARTS:
                raise CapacityError(Message(
                    "Workers were restarted {} times for exceeding their memory limit{} before "
                    "running any task (last: {}); the job would hang. Give workers more memory "
                    "({} or more).", len(restarts),
                    f" ({format_bytes(limit)})" if limit else "", restarts[-1]["worker"],
                    Param("memory_limit", "1GiB"))) from first
            if len(client.scheduler_info(n_workers=-1)["workers"]) >= wanted:
                break
            if time.monotonic() > deadline:
                raise _workers_lost(client, lost, wanted, wait, first) from first
            time.sleep(0.2)
        if time.monotonic() > deadline:
            raise _workers_lost(client, lost, wanted, wait, first) from first
        time.sleep(0.2)
        logger.warning("worker(s) %s stopped answering before running any task (not for "
                       "memory): asking the workers again", lost)


def _workers_lost(client, lost, wanted, wait, cause) -> ClusterError:
    have = len(client.scheduler_info(n_workers=-1)["workers"])
    return ClusterError(
        f"Worker(s) {lost} stopped answering before running any task ({type(cause).__name__}: "
        f"{cause}), and after {wait:.0f} s the cluster has {have} of its {wanted} workers "
        "answering. Start more workers, or wait longer (dask config dkrp.worker-wait, e.g. "
        "DASK_DKRP__WORKER_WAIT=300)."
    )


def _probe_budget(client, module):
    """One round of :func:`task_budget`: ``(budget, {address: exception})``."""
    import dask

    workers = client.scheduler_info(n_workers=-1)["workers"]
    died = {}
    if module is not None:  # a worker killed (by its nanny or not) while importing it
        loaded = client.run(importlib.import_module, module, on_error="return")
        died = {address: result for address, result in loaded.items()
                if isinstance(result, BaseException) and not isinstance(result, ImportError)}
    answers = client.run(_worker_rss, on_error="return")
    died.update({address: result for address, result in answers.items()
                 if isinstance(result, BaseException)})
    if died:
        return None, died
    pause = dask.config.get("distributed.worker.memory.pause", 0.8) or 0.95
    budget = None
    for address, info in workers.items():
        limit = info.get("memory_limit") or 0
        if not limit:
            continue
        used = answers.get(address, info.get("metrics", {}).get("memory", 0))
        if used >= pause * limit:
            raise CapacityError(Message(
                "Worker {} uses {} before running any task, but its memory limit is {} and a "
                "worker above {:.0%} of it ({}) runs nothing: the job would hang. Give workers "
                "more memory ({} or more).", address, format_bytes(used), format_bytes(limit),
                pause, format_bytes(pause * limit),
                Param("memory_limit", f"{-(-2 * used // (pause * 2**20)):.0f}MiB")))
        per_task = (pause * limit - used) / max(1, int(info.get("nthreads", 1)))
        budget = per_task if budget is None else min(budget, per_task)
    return budget, {}


def _memory_restarts(client, since: float) -> list[dict]:
    """The nannies' ``worker-restart-memory`` events since ``since`` (oldest first)."""
    try:
        events = client.get_events("worker-restart-memory")
    except Exception:  # noqa: BLE001 - a scheduler that keeps no events: none known
        return []
    return [dict(msg) for stamp, msg in events if stamp >= since and isinstance(msg, dict)]


def _rows_for(plan, projector, budget) -> int | None:
    """The chunk rows whose task fits ``budget`` (None: not even one row)."""
    from .feature_store.plan import choose_chunk_rows, model_bytes, task_memory

    X, attrs = plan["X"], plan["attrs"]
    itemsize = np.dtype(plan["dtype"]).itemsize
    per_row = task_memory(1, X.shape[1], X.dtype.itemsize, attrs["n_components"], itemsize)
    room = budget - model_bytes(projector)
    if room < per_row:
        return None
    return choose_chunk_rows(attrs["n_samples"], per_row, room)


def _does_not_fit(plan, budget, rows) -> Message:
    attrs = plan["attrs"]
    head = (f"One task ({attrs['chunk_rows']} rows x {attrs['n_components']} "
            f"{attrs['dtype']} features) needs about {format_bytes(plan['task_memory'])}, but "
            f"a worker has about {format_bytes(budget)} per task.")
    if rows is None:
        return Message("{} Not even one row fits: give workers more memory ({}) or fewer "
                       "threads, or use fewer components.", head, Param("memory_limit"))
    if plan["action"] != "create":
        return Message("{} The store {} has {} rows per chunk (kept when resuming): give "
                       "workers more memory ({}) or fewer threads, or start a new store with "
                       "{}.", head, plan["path"], attrs["chunk_rows"], Param("memory_limit"),
                       Param("chunk_rows", rows))
    return Message("{} Use {} or less.", head, Param("chunk_rows", rows))
