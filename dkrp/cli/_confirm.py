"""Big jobs say what they are and, past ``--confirm-above``, ask before they start.

``dkrp featurize`` prints the bytes it will write and ``dkrp train`` the voters it will
train, each with a time estimated from a calibration (the map, or one voter, timed on a
sample of the input on one core), before anything is fitted, started or written. Past
the command's ``--confirm-above`` the user is asked; ``--yes`` skips the question, and
without a terminal on stdin (a script, a batch job) the job is refused in one line
naming ``--yes``, since there is nobody to answer.
"""

from __future__ import annotations

import re
import sys

import click


def stdin_is_interactive() -> bool:
    """Whether someone can answer a question on stdin (a terminal)."""
    return sys.stdin.isatty()


def parse_size(ctx, param, value):
    """``--confirm-above`` of featurize: bytes from ``10GiB``, ``500MB``, ``0``..."""
    from dask.utils import parse_bytes

    try:
        size = parse_bytes(value)
    except (ValueError, TypeError):
        raise click.BadParameter(f"{value!r} is not a size (e.g. 10GiB, 500MB, 0)") from None
    if size < 0:
        raise click.BadParameter(f"{value!r} is negative")
    return int(size)


def parse_duration(ctx, param, value):
    """``--confirm-above`` of train: seconds from ``30min``, ``2h``, ``90s``, ``0``..."""
    from dask.utils import parse_timedelta

    try:  # dask says "m" and "minutes"; "min" is what people write
        seconds = parse_timedelta(re.sub(r"\s*mins?$", "m", str(value).strip()), default="s")
    except (ValueError, TypeError, KeyError):
        raise click.BadParameter(f"{value!r} is not a duration (e.g. 30min, 2h, 90s, "
                                 "0)") from None
    if seconds is None or seconds < 0:
        raise click.BadParameter(f"{value!r} is not a duration (e.g. 30min, 2h, 90s, 0)")
    return float(seconds)


def format_duration(seconds) -> str:
    """``0.25 s``, ``45 s``, ``12 min``, ``3.4 h`` or ``2.1 days``.

    Examples
    --------
    >>> [format_duration(s) for s in (0.25, 45, 720, 12240, 181440)]
    ['0.25 s', '45 s', '12 min', '3.4 h', '2.1 days']
    """
    seconds = float(seconds)
    if seconds < 1:
        return f"{seconds:.2g} s"
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def embedded_cores(scheduler, scheduler_file, n_workers) -> int | None:
    """Cores the embedded cluster will have (one thread per worker process), or None
    when the job goes to a running scheduler or to batch-job workers (``--jobqueue``):
    their cores are known once connected."""
    import dask

    from ._group import jobqueue_options

    if (scheduler or scheduler_file or dask.config.get("scheduler-address", None)
            or jobqueue_options()[0]):
        return None
    from ..parallel import available_cpus

    return int(n_workers) if n_workers else available_cpus()


def cluster_cores(client) -> int:
    """Worker threads of the cluster behind ``client`` (at least 1)."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))


def on_cores(cores) -> str:
    """``on 1 core``, ``on 16 cores``."""
    return f"on {cores} core{'s' if cores != 1 else ''}"


def confirm(job, limit, yes):
    """Ask whether to start ``job`` (a phrase: "featurize would write 22.5 GiB to X"),
    which is above ``limit`` (e.g. "--confirm-above 10.0 GiB"); ``--yes`` starts it.

    Raises
    ------
    click.ClickException
        No terminal to ask on and no ``--yes``, or the answer is no.
    """
    if yes:
        return
    if not stdin_is_interactive():
        raise click.ClickException(
            f"{job}, more than {limit}: pass --yes to start it (dkrp asks only on a "
            "terminal). Nothing was started.")
    if not click.confirm(f"{job}, more than {limit}. Start it?", default=False, err=True):
        raise click.ClickException("Not started: nothing was written.")
