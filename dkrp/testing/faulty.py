"""A projector whose task misbehaves on one partition, for reliability tests.

:class:`FaultyProjection` is :class:`dkrp.PolynomialRandomProjection` with four
more parameters that say how to misbehave, where and how often. Everything is in
its (JSON) parameters, so it travels in the task graph like any spec and misbehaves
the same way on whichever worker runs the task; no mocks, no monkeypatching.

Importing this module registers the class for :func:`dkrp.from_spec`. Worker
processes must import it before they rebuild the spec::

    start_local_cluster(n_workers=2, preload=["dkrp.testing.faulty"])

(``preload`` is run again by every worker a nanny restarts.)
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

from .._validation import check_choice, check_integer
from ..errors import InvalidInputError
from ..features.polynomial import PolynomialRandomProjection

__all__ = ["FAULTS", "FaultyProjection", "fault_pids"]

#: ``"exit"``: ``os._exit(1)`` (the worker process dies without cleanup, like
#: SIGKILL); ``"oserror"``: raise ``OSError(EIO)``; ``"hang"``: ``SIGSTOP`` the worker
#: process (it stops heartbeating; SIGCONT or SIGKILL it to clean up).
FAULTS = ("exit", "oserror", "hang")


class FaultyProjection(PolynomialRandomProjection):
    """KRP that misbehaves on the row block whose first value is ``trigger``.

    Other blocks (and the chosen one once the faults are used up) are transformed
    exactly as :class:`~dkrp.PolynomialRandomProjection` with the same parameters
    does, bit for bit.

    Parameters
    ----------
    fault : {"exit", "oserror", "hang"}, default="oserror"
        What the task does instead of transforming (see :data:`FAULTS`).
    trigger : float or None, default=None
        The chosen block is the one whose first entry ``block[0, 0]`` equals
        ``trigger`` (compared in the block's dtype): e.g. ``X[row, 0]`` for the block
        starting at ``row``. None: never misbehave.
    times : int, default=1
        How many times to misbehave, counted across processes with marker files in
        ``state_dir``; 0 means every time.
    state_dir : str or None, default=None
        Directory for the attempt markers ``fault-<n>`` (each holds the pid that
        misbehaved, see :func:`fault_pids`). Required unless ``trigger`` is None.
    wait_store : str or None, default=None
        A feature store path: before misbehaving, wait (up to 120 s) until
        ``wait_done`` of its chunks are marked done, so the fault hits at a
        data-driven point of the run.
    wait_done : int, default=0
    delay : float, default=0.0
        Seconds every other block (not the chosen one) sleeps before it is
        transformed: a task still running when the chosen one fails.
    **params
        Those of :class:`~dkrp.PolynomialRandomProjection`.
    """

    def __init__(
        self,
        *,
        degree=2,
        n_components=100,
        n_hyperplanes=1000,
        n_terms=1,
        distribution="gaussian",
        density="auto",
        pool="iid",
        index_design="random",
        random_state=None,
        fault="oserror",
        trigger=None,
        times=1,
        state_dir=None,
        wait_store=None,
        wait_done=0,
        delay=0.0,
    ):
        super().__init__(
            degree=degree, n_components=n_components, n_hyperplanes=n_hyperplanes,
            n_terms=n_terms, distribution=distribution, density=density, pool=pool,
            index_design=index_design, random_state=random_state,
        )
        self.fault = fault
        self.trigger = trigger
        self.times = times
        self.state_dir = state_dir
        self.wait_store = wait_store
        self.wait_done = wait_done
        self.delay = delay

    def _resolve_params(self, n_features):
        super()._resolve_params(n_features)
        check_choice("fault", self.fault, FAULTS)
        check_integer("times", self.times, minimum=0)
        check_integer("wait_done", self.wait_done, minimum=0)
        if not 0 <= float(self.delay) < 600:
            raise InvalidInputError(f"delay must be in [0, 600) seconds, got {self.delay!r}.")
        if self.trigger is not None and self.state_dir is None:
            raise InvalidInputError("state_dir is required to count faults when trigger is set.")

    def output_block(self, X, output="features"):
        if self.trigger is not None and X.shape[0] > 0 and self._chosen(X):
            self._maybe_misbehave()
        elif self.delay:
            time.sleep(float(self.delay))
        return super().output_block(X, output)

    def _chosen(self, X):
        first = np.asarray(X[0, 0], dtype=X.dtype)
        return bool(first == np.asarray(self.trigger, dtype=X.dtype))

    def _maybe_misbehave(self):
        if not self._take_turn():
            return
        if self.wait_store is not None:
            _wait_for_done(Path(self.wait_store), int(self.wait_done), timeout=120.0)
        if self.fault == "exit":
            os._exit(1)
        if self.fault == "hang":
            os.kill(os.getpid(), signal.SIGSTOP)
            return  # continued (SIGCONT): carry on as if nothing happened
        raise OSError(5, "Input/output error (injected by dkrp.testing.faulty)")

    def _take_turn(self) -> bool:
        """Claim the next fault marker (atomically); False once ``times`` are used up."""
        state = Path(self.state_dir)
        state.mkdir(parents=True, exist_ok=True)
        n = 0
        while self.times == 0 or n < self.times:
            try:
                fd = os.open(state / f"fault-{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                n += 1
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            return True
        return False


def fault_pids(state_dir) -> list[int]:
    """Pids of the processes that misbehaved, in order (one per fault)."""
    state = Path(state_dir)
    files = sorted(state.glob("fault-*"), key=lambda p: int(p.name.split("-")[1]))
    return [int(p.read_text() or 0) for p in files]


def _wait_for_done(store: Path, count: int, timeout: float):
    folder = store / "done" / "c"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # chunk files are named by index; zarr's "*.partial" temporaries are not done yet
        if folder.is_dir() and sum(n.isdigit() for n in os.listdir(folder)) >= count:
            return
        time.sleep(0.01)
