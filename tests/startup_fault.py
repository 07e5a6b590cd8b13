"""A module whose import makes a worker die, for the worker-churn tests.

Imported on the workers by :func:`dkrp.jobs.task_budget` (its ``module``). The
environment of the worker processes says what to do:

``DKRP_STARTUP_FAULT``
    A directory for markers; unset, the import does nothing.
``DKRP_STARTUP_FAULT_MODE``
    ``"exit"``: the first importing process (across processes: a marker file) exits at
    once, as a preempted worker would; ``"memory"``: every importing process holds more
    memory than its limit until its nanny restarts it.
"""

import os
import time
from pathlib import Path

_folder = os.environ.get("DKRP_STARTUP_FAULT")
_mode = os.environ.get("DKRP_STARTUP_FAULT_MODE", "exit")

if _folder:
    if _mode == "exit":
        try:
            fd = os.open(Path(_folder) / "exited", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.close(fd)
            os._exit(1)
    elif _mode == "memory":
        held = b"x" * (400 * 2**20)  # touched pages: resident, unlike a fresh bytearray
        time.sleep(30)  # the nanny's memory monitor terminates the process meanwhile
