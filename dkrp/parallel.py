"""Clusters: start an embedded one, attach to a remote one, check its workers.

* :func:`start_local_cluster` and :func:`connect` start or attach to a cluster;
  every socket of an embedded cluster is bound to 127.0.0.1.
* :func:`start_slurm_cluster` starts workers as SLURM jobs (dask-jobqueue), TLS on.
* :func:`check_workers` verifies that every worker regenerates the same
  hyperplanes as the client (same numpy, same dkrp).

The dask path itself (:func:`featurize`, :func:`fit_dask`, ...) lives in
:mod:`dkrp._blockwise`; its public functions are re-exported here, where users
have always found them.
"""

from __future__ import annotations

import contextlib
import logging
import os

import numpy as np

from ._blockwise import (
    featurize,
    fit_dask,
    prepare_input,
    row_offsets,
    spec_json,
    transform_partition,
)
from ._resources import available_cpus, available_memory
from ._spec import rebuild
from .errors import ClusterError, InvalidInputError, MissingDependencyError, SpecError

logger = logging.getLogger(__name__)

__all__ = [
    "featurize",
    "fit_dask",
    "prepare_input",
    "row_offsets",
    "transform_partition",
    "start_local_cluster",
    "start_slurm_cluster",
    "connect",
    "check_workers",
    "spec_json",
]


# -- clusters --------------------------------------------------------------------------


def start_local_cluster(
    n_workers=None, threads_per_worker=None, memory_limit="auto", processes=True, **kwargs
):
    """Start a ``LocalCluster`` whose every listening socket is on 127.0.0.1.

    Parameters
    ----------
    n_workers : int, optional
        Default: one worker process per CPU this process may use (inside a SLURM job,
        per CPU of the job's allocation: :func:`dkrp._resources.available_cpus`).
    threads_per_worker : int, optional
        Default 1: parallelism comes from processes, and each task then runs its
        GEMM and gather on its own share of the CPUs.
    memory_limit : str, float or int, default="auto"
        Per worker (``"auto"`` divides the machine's memory among workers; inside a
        SLURM job, the job's memory: :func:`dkrp._resources.available_memory`).
    processes : bool, default=True
    **kwargs
        Passed to ``distributed.LocalCluster``.

    Returns
    -------
    distributed.LocalCluster

    Notes
    -----
    The scheduler, the dashboard and every worker and nanny bind to 127.0.0.1 (a
    Dask scheduler runs arbitrary code for whoever can reach it). Each worker gets
    ``DKRP_NUM_THREADS`` = its share of the CPUs, so transforms inside tasks do not
    oversubscribe the machine, and starts with :data:`WORKER_MALLOC_ENV` (unless the
    dask config sets those variables otherwise).
    """
    from distributed import LocalCluster

    cpus = available_cpus()
    if n_workers is None:
        n_workers = cpus if processes else 1
    if threads_per_worker is None:
        threads_per_worker = 1 if processes else cpus
    n_workers, threads_per_worker = int(n_workers), int(threads_per_worker)
    share = max(1, cpus // max(1, n_workers)) if processes else cpus
    allocated = available_memory()
    if memory_limit == "auto" and allocated is not None:
        # distributed's "auto" divides the node's memory, not the job's
        memory_limit = allocated // (n_workers if processes else 1)
    options = dict(
        n_workers=n_workers,
        threads_per_worker=threads_per_worker,
        memory_limit=memory_limit,
        processes=processes,
        dashboard_address="127.0.0.1:0",
        worker_dashboard_address="127.0.0.1:0",
    )
    if processes:
        # workers in this process talk over distributed's in-process transport
        # (inproc://), which listens on no socket and takes no host
        options["host"] = "127.0.0.1"
    if processes:
        env = dict(kwargs.pop("env", None) or {})
        env.setdefault("DKRP_NUM_THREADS", str(share))
        options["env"] = env
    options.update(kwargs)
    logger.info(
        "starting LocalCluster: %d workers x %d threads, memory_limit=%s",
        n_workers,
        threads_per_worker,
        memory_limit,
    )
    if not processes:
        return LocalCluster(**options)
    # Ctrl-C in a terminal sends SIGINT to every process of the foreground group, the
    # worker processes too, which then die printing tracebacks. The client handles it
    # (and closes the cluster); workers ignore it: spawned while SIGINT is ignored, they
    # inherit that (Python keeps an ignored SIGINT ignored), and a worker a nanny
    # restarts later ignores it through the preload.
    options["preload"] = [*list(options.get("preload") or []), "dkrp._worker_signals"]
    import dask

    # pre-spawn: glibc reads them when the process starts (a nanny keeps them for restarts)
    spawn_env = {**(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}),
                 **_worker_malloc_env()}
    with _sigint_ignored(), dask.config.set({"distributed.nanny.pre-spawn-environ": spawn_env}):
        return LocalCluster(**options)


#: glibc malloc settings of dkrp's worker processes (read by glibc when a process starts).
#: distributed sets ``MALLOC_TRIM_THRESHOLD_=65536`` (its ``nanny.pre-spawn-environ``) so
#: that workers hand freed memory back to the OS at once; that also fixes glibc's mmap
#: threshold at 128 KiB, so every array a task allocates comes as fresh pages from the
#: kernel, and on this project's machines a fresh page costs far more than a reused one
#: (benchmarks/RESULTS.md, ``bench_memory``). Measured on the MNIST shape (KRP g=2,
#: k=1500, p=488, 10,240-row chunks read from a dataset store, one thread): 60,000 minor
#: faults and 1.08 s per pass with distributed's setting, 2,400 faults and 0.88-0.95 s with
#: glibc's defaults or these (the pass reuses its freed buffers). A worker keeps up to
#: ``MALLOC_TRIM_THRESHOLD_`` of freed memory for reuse instead of returning it.
WORKER_MALLOC_ENV = {"MALLOC_TRIM_THRESHOLD_": str(256 * 2**20),
                     "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20)}


def _worker_malloc_env() -> dict:
    """:data:`WORKER_MALLOC_ENV`, less what the user's dask config
    (``distributed.nanny.pre-spawn-environ``) sets to other than distributed's default:
    a setting of theirs is kept."""
    import dask

    configured = dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}
    defaults = {"MALLOC_TRIM_THRESHOLD_": 65536}
    return {k: v for k, v in WORKER_MALLOC_ENV.items()
            if k not in configured or str(configured[k]) == str(defaults.get(k))}


@contextlib.contextmanager
def _sigint_ignored():
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


#: Where :func:`start_slurm_cluster` writes the temporary TLS certificates of the workers
#: when the dask config names no ``jobqueue.slurm.shared-temp-directory``: the home
#: directory, which compute nodes see on most clusters.
SLURM_TLS_DIRECTORY = "~/.dkrp-dask-tls"

#: Lines every worker job runs before its workers start: one thread per worker process
#: (dkrp's transforms and the BLAS pools), so tasks never oversubscribe a node.
SLURM_JOB_PROLOGUE = ("export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1",
                      "export DKRP_NUM_THREADS=1")


def slurm_cluster_options(**overrides) -> dict:
    """Keyword arguments of ``dask_jobqueue.SLURMCluster`` for dkrp's workers.

    The job's size, queue, account, walltime, interface and the like come from the
    dask config (``jobqueue.slurm.*``, e.g. ``~/.config/dask/jobqueue.yaml`` or
    ``DASK_JOBQUEUE__SLURM__CORES=8``), as for any dask-jobqueue cluster; dkrp adds:

    * ``security=True``: temporary TLS certificates, so the scheduler listens on
      ``tls://`` and only this client and its workers can talk to it. The workers'
      certificates are written to ``jobqueue.slurm.shared-temp-directory``, else
      :data:`SLURM_TLS_DIRECTORY` (it must be on a file system the compute nodes see);
    * one single-threaded worker process per core (``processes = cores`` unless the
      config says otherwise) and :data:`SLURM_JOB_PROLOGUE`;
    * the scheduler's dashboard on 127.0.0.1 (reach it through ``ssh -L``) unless the
      config's ``scheduler-options`` place it.

    Parameters
    ----------
    **overrides
        Keyword arguments of ``SLURMCluster``, taking precedence over all of the above.

    Returns
    -------
    dict

    Raises
    ------
    ClusterError
        The dask config gives no job size (``cores`` and ``memory``).
    """
    import dask

    def config(key):  # dask.config.get reads DASK_JOBQUEUE__SLURM__SHARED_TEMP_DIRECTORY too
        return dask.config.get(f"jobqueue.slurm.{key}", None)

    cores = overrides.get("cores", config("cores"))
    if not cores or not overrides.get("memory", config("memory")):
        raise ClusterError(
            "Workers as SLURM jobs need the size of a job: set jobqueue.slurm.cores and "
            "jobqueue.slurm.memory in the dask config (~/.config/dask/jobqueue.yaml, or "
            "DASK_JOBQUEUE__SLURM__CORES=8 DASK_JOBQUEUE__SLURM__MEMORY=32GiB).")
    tls_directory = os.path.expanduser(config("shared-temp-directory")
                                       or SLURM_TLS_DIRECTORY)
    os.makedirs(tls_directory, mode=0o700, exist_ok=True)
    scheduler_options = {"dashboard_address": "127.0.0.1:0",
                         **(config("scheduler-options") or {})}
    options = dict(
        cores=int(cores),
        processes=config("processes") or int(cores),
        security=True,
        shared_temp_directory=tls_directory,
        job_script_prologue=[*(config("job-script-prologue") or []),
                             *SLURM_JOB_PROLOGUE],
        scheduler_options=scheduler_options,
    )
    options.update(overrides)
    return options


#: Seconds :func:`start_slurm_cluster` gives sbatch to accept the worker jobs.
#: Seconds a job waits for workers: replacements of workers lost before its first task,
#: and the rest of a SLURM cluster's workers once the first has joined (dask config
#: ``dkrp.worker-wait`` overrides it, e.g. ``DASK_DKRP__WORKER_WAIT=300``).
WORKER_WAIT = 60.0


def worker_wait() -> float:
    """:data:`WORKER_WAIT`, or the dask config ``dkrp.worker-wait`` where it is set."""
    import dask

    return float(dask.config.get("dkrp.worker-wait", WORKER_WAIT))


SLURM_SUBMIT_WAIT = 30.0


def start_slurm_cluster(jobs, wait=None, **overrides):
    """Start a dask-jobqueue ``SLURMCluster`` of ``jobs`` worker jobs (TLS on) and wait
    for their workers.

    Parameters
    ----------
    jobs : int
        SLURM jobs to submit, each of ``cores`` single-threaded worker processes.
    wait : float, optional
        Seconds to wait for every job's workers once the first has joined (default:
        the dask config ``dkrp.worker-wait``, 60 s); then the work starts with those
        up, and the others join as they start. The first is waited for as long as the
        queue takes.
    **overrides
        Keyword arguments of ``SLURMCluster`` (see :func:`slurm_cluster_options`).

    Returns
    -------
    dask_jobqueue.SLURMCluster
        Close it (or use it as a context manager) to cancel its jobs.

    Raises
    ------
    MissingDependencyError
        dask-jobqueue is not installed (the ``slurm`` extra).
    ClusterError
        No job size in the dask config, or ``sbatch`` refused the jobs.
    """
    import time


    try:
        from dask_jobqueue import SLURMCluster
    except ImportError as exc:
        raise MissingDependencyError("Workers as SLURM jobs need dask-jobqueue: pip install "
                                     "'dkrp[slurm]'.") from exc
    if wait is None:
        wait = worker_wait()
    options = slurm_cluster_options(**overrides)
    cluster = SLURMCluster(**options)
    refused = _RefusedJobs()
    tornado_log = logging.getLogger("tornado.application")
    tornado_log.addFilter(refused)
    try:
        cluster.scale(jobs=int(jobs))
        wanted = int(jobs) * int(options["processes"])
        logger.info("submitting %d SLURM job(s) of %d worker(s); waiting for them", jobs,
                    options["processes"])
        submitted_by = time.monotonic() + SLURM_SUBMIT_WAIT
        while not cluster.scheduler_info.get("workers"):
            # a job object joins cluster.workers once sbatch has answered, with a job id
            # if it was accepted
            started = list(cluster.workers.values())
            accepted = [job for job in started if getattr(job, "job_id", None)]
            if (started and not accepted) or (not started and time.monotonic() > submitted_by):
                raise ClusterError(
                    f"sbatch refused dkrp's worker jobs: {refused.message or 'no answer in '}"
                    f"{'' if refused.message else f'{SLURM_SUBMIT_WAIT:.0f} s'}. Check the "
                    "jobqueue.slurm settings of the dask config (queue, account, memory, "
                    "walltime).")
            time.sleep(0.2)
        deadline = time.monotonic() + wait
        while (len(cluster.scheduler_info.get("workers", {})) < wanted
               and time.monotonic() < deadline):
            time.sleep(0.2)
    except BaseException:
        _close_refused(cluster)
        raise
    finally:
        tornado_log.removeFilter(refused)
    return cluster


def _close_refused(cluster):
    """Close a cluster that failed to start, cancelling the jobs it did submit.

    A job sbatch refused stays in the cluster, never started, and distributed's close
    asserts that every worker it created was started (distributed 2026.8,
    ``SpecCluster._close``): those are dropped first (``_created`` is that record).
    """
    for name, job in list(cluster.workers.items()):
        if not getattr(job, "job_id", None):
            cluster.workers.pop(name)
            cluster.worker_spec.pop(name, None)
            getattr(cluster, "_created", set()).discard(job)
    try:
        cluster.close()
    except Exception:  # noqa: BLE001 - the error that stopped the start is the one to report
        logger.warning("closing the SLURM cluster that failed to start", exc_info=True)


class _RefusedJobs(logging.Filter):
    """Keeps sbatch's message when it refuses a dask-jobqueue job, and drops the record.

    dask-jobqueue submits jobs in the event loop, where a refused ``sbatch`` only becomes
    a logged ``RuntimeError`` with a traceback (``Command exited with non-zero exit
    code ... stderr: sbatch: error: ...``); :func:`start_slurm_cluster` reports it as one
    line instead.
    """

    message = ""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        text = str(exc) if isinstance(exc, RuntimeError) else ""
        if "Command exited with non-zero exit code" not in text:
            return True
        stderr = text.split("stderr:", 1)[-1]
        self.message = "; ".join(line.strip() for line in stderr.splitlines() if line.strip())
        return False


@contextlib.contextmanager
def connect(scheduler=None, scheduler_file=None, n_workers=None, memory_limit=None,
            threads_per_worker=None, jobqueue=None, jobs=None):
    """Context manager giving a ``distributed.Client``.

    Attach to ``scheduler`` (an address) or ``scheduler_file``; with ``jobqueue="slurm"``,
    start ``jobs`` worker jobs (:func:`start_slurm_cluster`) and cancel them on exit;
    with none of these, start an embedded :func:`start_local_cluster` sized to the
    machine (or to the SLURM job it runs in) and close it on exit. Security (TLS)
    settings of a running scheduler come from ``dask.config``
    (``distributed.comm.tls.*``), as for any ``Client``.

    Yields
    ------
    distributed.Client
    """
    from distributed import Client

    if scheduler is not None and scheduler_file is not None:
        raise InvalidInputError("Give scheduler or scheduler_file, not both.")
    if jobqueue is not None:
        if jobqueue != "slurm":
            raise InvalidInputError(f"jobqueue must be 'slurm', got {jobqueue!r}.")
        if scheduler is not None or scheduler_file is not None or n_workers is not None \
                or memory_limit is not None:
            raise InvalidInputError(
                "jobqueue starts its own workers; it cannot be used with scheduler, "
                "scheduler_file, n_workers or memory_limit (a job's size is in the dask "
                "config: jobqueue.slurm.cores, jobqueue.slurm.memory).")
        with start_slurm_cluster(1 if jobs is None else jobs) as cluster, \
                Client(cluster) as client:
            yield client
        return
    if (scheduler is not None or scheduler_file is not None) and (
        n_workers is not None or memory_limit is not None
    ):
        raise InvalidInputError(
            "n_workers and memory_limit size an embedded cluster; they cannot be used with "
            "scheduler or scheduler_file."
        )
    if scheduler is not None or scheduler_file is not None:
        client = Client(address=scheduler, scheduler_file=scheduler_file)
        try:
            yield client
        finally:
            client.close()
        return
    cluster = start_local_cluster(
        n_workers=n_workers,
        threads_per_worker=threads_per_worker,
        memory_limit="auto" if memory_limit is None else memory_limit,
    )
    try:
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def _worker_check(spec_text):
    """Regenerate the projector of ``spec_text`` here and report its checksum."""
    from . import __version__

    versions = {"numpy": np.__version__, "dkrp": __version__}
    try:
        est = rebuild(spec_text)
        return {"checksum": est.spec_checksum_, "error": None, **versions}
    except SpecError as exc:
        message = str(exc)
    try:  # rebuild without verification to report what this process regenerates
        checksum = rebuild(spec_text, verify=False).spec_checksum_
    except Exception:  # noqa: BLE001 - the first error is the one reported
        checksum = None
    return {"checksum": checksum, "error": message, **versions}


def check_workers(client, projector, *, wait=60.0) -> dict:
    """Regenerate ``projector`` on every worker and compare checksums with the client.

    A cluster whose workers are all gone for a moment (killed, preempted, restarting)
    is waited for, up to ``wait`` seconds, so a job rides out that churn.

    Returns
    -------
    dict
        Worker address -> checksum (all equal to ``projector.spec_checksum_``), for
        the workers that answered. A worker that dies while asked (preempted, killed)
        is left out with a logged warning, not taken for a mismatch.

    Raises
    ------
    SpecError
        Naming each worker whose hyperplanes differ, with its numpy and dkrp versions.
    ClusterError
        (A ``RuntimeError``.) If the cluster has no workers, or none answered.
    """
    import time

    text = spec_json(projector)
    deadline = time.monotonic() + wait
    while True:
        answers = client.run(_worker_check, text, on_error="return")
        # a worker that died while asked (preempted, killed) is not a mismatch: its
        # replacement is not checked here, but every task verifies the checksum of the
        # spec it rebuilds, wherever it runs
        lost = sorted(addr for addr, r in answers.items() if isinstance(r, OSError))
        for addr, r in answers.items():
            if isinstance(r, BaseException) and addr not in lost:
                raise r
        results = {addr: r for addr, r in answers.items() if addr not in lost}
        if lost:
            logger.warning("worker(s) %s stopped answering while the hyperplanes were "
                           "checked; %d other(s) checked", ", ".join(lost), len(results))
        remaining = deadline - time.monotonic()
        if results or remaining <= 0:
            break
        with contextlib.suppress(TimeoutError):  # the loop's next pass says what is wrong
            client.wait_for_workers(1, timeout=remaining)
    if not results:
        raise ClusterError(
            (f"The cluster has no workers to check (waited {wait:g} s for one)." if not lost
             else f"Every worker ({', '.join(lost)}) stopped answering while the hyperplanes "
                  f"were checked, and none answered within {wait:g} s.")
            + " Start workers, or check that they can reach the scheduler.")
    expected = projector.spec_checksum_
    bad = {addr: r for addr, r in results.items() if r["checksum"] != expected}
    if bad:
        lines = [
            f"worker {addr} regenerates checksum {str(r['checksum'])[:12]}… "
            f"(numpy {r['numpy']}, dkrp {r['dkrp']})"
            for addr, r in sorted(bad.items())
        ]
        raise SpecError(
            f"{len(bad)} of {len(results)} workers do not regenerate the hyperplanes of this "
            f"{type(projector).__name__} (client checksum {expected[:12]}…, numpy "
            f"{np.__version__}): " + "; ".join(lines) + ". Pin the same numpy and dkrp on "
            "every client and worker."
        )
    return {addr: r["checksum"] for addr, r in results.items()}
