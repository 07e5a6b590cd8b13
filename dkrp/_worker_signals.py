"""Worker preload: ignore SIGINT (a terminal's Ctrl-C reaches every process of its group).

The client process handles Ctrl-C and closes the embedded cluster; a worker that also
took the signal would die printing tracebacks. Used by
:func:`dkrp.parallel.start_local_cluster`.
"""

from __future__ import annotations

import signal


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
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
