"""Worker preload: ignore SIGINT (a terminal's Ctrl-C reaches every process of its group).

The client process handles Ctrl-C and closes the embedded cluster; a worker that also
took the signal would die printing tracebacks. Used by
:func:`dkrp.parallel.start_local_cluster`. Also what the CLI silences in the workers of
its embedded cluster: :class:`QuietTaskFailures`, :func:`quiet_distributed_logs`.
"""

from __future__ import annotations

import logging
import signal

from distributed.diagnostics.plugin import WorkerPlugin


def dask_setup(worker=None):
    """Called by distributed in each worker process after it starts."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread (a worker inside another process)
        pass


def quiet_distributed_logs(dask_worker=None):
    """Silence distributed's logging here (run on workers of an interrupted job).

    A cancelled task logs a warning as its worker closes; after Ctrl-C the CLI says
    all there is to say in one line.
    """
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


class _TaskFailureFilter(logging.Filter):
    """Drops distributed's ``Compute Failed`` record (a task raised), keeps the rest."""

    def filter(self, record):
        return not (isinstance(record.msg, str) and record.msg.startswith("Compute Failed"))


_TASK_FAILURES = _TaskFailureFilter()


class QuietTaskFailures(WorkerPlugin):
    """Keep a worker from logging the traceback of a task that raised.

    The exception travels to the client, which reports it (the CLI in one line, with the
    traceback under ``-v``); the worker's ``distributed.worker - ERROR - Compute Failed``
    record with the same traceback would only precede that line on the terminal. Other
    worker log records are untouched. The CLI registers it on its embedded cluster unless
    ``-v`` is given; the scheduler hands it to workers that a nanny restarts.
    """

    name = "dkrp-quiet-task-failures"

    def setup(self, worker):
        logging.getLogger("distributed.worker").addFilter(_TASK_FAILURES)

    def teardown(self, worker):
        logging.getLogger("distributed.worker").removeFilter(_TASK_FAILURES)
