"""The ``dkrp`` click group and what every command shares.

Owns the ``main`` group (logging levels, ``--version``), the translation of every
error that reaches the command line: a user's error (a :class:`dkrp.errors.DkrpError`,
a file or operating-system error) becomes one or two lines (the parameters a library
message names spelled as the command's flags; ``-v`` adds the traceback), and anything
else is a bug in dkrp, shown with its traceback and a request to report it. The cluster
options (``--scheduler``, ``--scheduler-file``, ``--n-workers``, ``--memory-limit``,
``--jobqueue``, ``--jobs``) and the client they open, and the parsing of
number-or-word options (``--gamma scale``).
The commands live in the sibling modules and register themselves on ``main``.
"""

from __future__ import annotations

import contextlib
import logging
import sys

import click


def _user_errors():
    """What the command line reports in its own words: dkrp's errors (a bad input,
    parameter or file, a store or cluster that cannot do the job, memory or disk too
    small) and the operating system's (a missing or unwritable file, a full disk)."""
    from ..errors import DkrpError

    return (DkrpError, OSError)


def is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's to fix (one or two lines), not a bug in dkrp (a
    traceback): one of :func:`_user_errors`, or a file that ends early (``EOFError``)."""
    return isinstance(exc, (*_user_errors(), EOFError))


#: Library parameters whose flag is neither named nor spelled as they are.
_OPTION_NAMES = {"random_state": "seed", "n_voters": "voters"}


def _flag(command, param) -> str | None:
    """``param`` (a :class:`dkrp.errors.Param`) as ``command``'s flag; None if it has none."""
    import shlex

    if param.command is not None:
        command = main.commands.get(param.command)
    spelled = "--" + param.name.replace("_", "-")
    option = None
    for name in (param.name, spelled, _OPTION_NAMES.get(param.name)):
        option = option or next((p for p in getattr(command, "params", ())
                                 if isinstance(p, click.Option)
                                 and (p.name == name or name in p.opts)), None)
    if option is None:
        return None
    long = next((o for o in option.opts if o.startswith("--")), option.opts[0])
    if not param.has_value:
        return long
    if param.metavar is not None:
        return f"{long} {param.metavar}"
    if option.is_flag:
        if param.value:
            return long
        return option.secondary_opts[0] if option.secondary_opts else None
    values = param.value if option.multiple and isinstance(param.value, (list, tuple)) else [
        param.value]
    return " ".join(f"{long} {shlex.quote(str(v))}" for v in values)


def cli_wording(message, command=None) -> str:
    """``message`` as the command line says it: each parameter it names as a flag.

    A :class:`dkrp.errors.Message` is rendered with the options of ``command``
    (default: the command running); any other message is returned as it is.
    """
    from ..errors import Message

    if not isinstance(message, Message):
        return str(message)
    if command is None:
        ctx = click.get_current_context(silent=True)
        command = ctx.command if ctx is not None else None
    return message.render(lambda param: _flag(command, param))


def error_message(exc: BaseException, command=None) -> str:
    """One or two lines: what failed, where, and what to do."""
    from ..errors import render_message

    if isinstance(exc, EOFError):
        return ("An input ended early (EOFError: a truncated or corrupt file?). Check the "
                "file against its checksum; rerun with -v for where it happened.")
    if is_user_error(exc):
        if isinstance(exc, (FileNotFoundError, PermissionError)) and exc.filename:
            text = str(exc) or type(exc).__name__
            return f"{exc.strerror or text}: {exc.filename}" if not str(exc).startswith(
                ("No ", "Input")) else text
        return cli_wording(render_message(exc), command) if str(exc) else type(exc).__name__
    return (f"{type(exc).__name__}: {exc}. This is a bug in dkrp: please report it with the "
            "traceback above.")


class _Group(click.Group):
    """A user's error reaching the command line becomes one or two lines (-v adds the
    traceback); any other exception is a bug: its traceback, then one line asking to
    report it. Ctrl-C (KeyboardInterrupt) is click's ``Aborted!``."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, KeyboardInterrupt):
            raise
        except BrokenPipeError:  # `dkrp methods | head`: the reader left, nothing to say
            sys.stderr.close()
            raise click.exceptions.Exit(0) from None
        except click.ClickException as exc:
            cause = exc.__cause__
            if cause is not None and (ctx.params.get("verbose") or not (
                    isinstance(cause, click.ClickException) or is_user_error(cause))):
                _print_traceback(cause)
            raise
        except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
            if ctx.params.get("verbose") or not is_user_error(exc):
                _print_traceback(exc)
            command = self.get_command(ctx, ctx.invoked_subcommand or "")
            raise click.ClickException(error_message(exc, command)) from exc


def _print_traceback(exc):
    import traceback

    traceback.print_exception(exc, file=sys.stderr)


@contextlib.contextmanager
def as_click_errors():
    """A user's error (:func:`is_user_error`) inside becomes a one-line
    :class:`click.ClickException` in the command's wording; anything else (a bug)
    passes on to the group, which shows its traceback."""
    try:
        yield
    except click.ClickException:
        raise
    except _user_errors() as exc:
        from ..errors import render_message

        raise click.ClickException(cli_wording(render_message(exc))) from exc


#: Where ``--jobqueue``/``--jobs`` keep their values in the click context's ``meta``: every
#: command reads them through :func:`cluster_client`, none takes them as parameters.
JOBQUEUE_META = "dkrp.jobqueue"


def _keep_jobqueue(ctx, param, value):
    ctx.meta.setdefault(JOBQUEUE_META, {})[param.name] = value
    return value


def jobqueue_options(ctx=None) -> tuple:
    """``(--jobqueue, --jobs)`` of the command running (``(None, None)`` outside one)."""
    ctx = ctx or click.get_current_context(silent=True)
    given = ctx.meta.get(JOBQUEUE_META, {}) if ctx is not None else {}
    return given.get("jobqueue"), given.get("jobs")


def cluster_options(func):
    """The cluster options of a command. ``--jobqueue``/``--jobs`` are not passed to the
    command: :func:`cluster_client` reads them (:func:`jobqueue_options`)."""
    options = [
        click.option("--scheduler", metavar="ADDRESS",
                     help="Address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786 "
                          "(TLS settings come from dask.config)."),
        click.option("--scheduler-file", type=click.Path(dir_okay=False),
                     help="Scheduler file written by `dask scheduler --scheduler-file`."),
        click.option("--n-workers", type=click.IntRange(min=1),
                     help="Worker processes of the embedded cluster (default: one per CPU)."),
        click.option("--memory-limit",
                     help="Memory limit per embedded worker, e.g. 4GiB (default: auto)."),
        click.option("--jobqueue", type=click.Choice(["slurm"]), expose_value=False,
                     callback=_keep_jobqueue,
                     help="Start the workers as batch jobs (dask-jobqueue, TLS on): --jobs "
                          "jobs of the size the dask config sets (jobqueue.slurm.cores, "
                          ".memory, .queue...; see cluster/slurm/README.md)."),
        click.option("--jobs", type=click.IntRange(min=1), expose_value=False,
                     callback=_keep_jobqueue,
                     help="Batch jobs of workers to start with --jobqueue.  [default: 1]"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@contextlib.contextmanager
def cluster_client(scheduler, scheduler_file, n_workers, memory_limit, quiet=False):
    import dask

    from ..parallel import connect

    if scheduler is None and scheduler_file is None:
        scheduler = dask.config.get("scheduler-address", None)
    if (scheduler or scheduler_file) and (n_workers or memory_limit):
        raise click.UsageError(
            "--n-workers/--memory-limit size the embedded cluster; drop them when using "
            "--scheduler or --scheduler-file."
        )
    jobqueue, jobs = jobqueue_options()
    if jobs is not None and jobqueue is None:
        raise click.UsageError("--jobs counts the batch jobs of --jobqueue; add --jobqueue "
                               "slurm, or drop --jobs.")
    if jobqueue is not None and (scheduler or scheduler_file or n_workers or memory_limit):
        raise click.UsageError(
            "--jobqueue starts its own workers; drop --scheduler, --scheduler-file, "
            "--n-workers and --memory-limit (a job's size is in the dask config: "
            "jobqueue.slurm.cores, jobqueue.slurm.memory).")
    connected = False
    try:
        _drop_distributed_cancel_race()
        with connect(scheduler=scheduler, scheduler_file=scheduler_file, n_workers=n_workers,
                     memory_limit=memory_limit, jobqueue=jobqueue, jobs=jobs) as client:
            connected = True
            embedded = not (scheduler or scheduler_file or jobqueue)
            if jobqueue and not quiet:
                click.echo(f"dask dashboard: {client.dashboard_link} ({len(client.nthreads())} "
                           f"workers in {jobs or 1} {jobqueue} job(s))", err=True)
            if embedded and not _verbosity():
                # a task's error reaches this process and is reported in one line
                from .._worker_signals import QuietTaskFailures

                client.register_plugin(QuietTaskFailures())
            if embedded and not quiet:
                click.echo(f"dask dashboard: {client.dashboard_link}", err=True)
            interrupted = False
            try:
                yield client
            except KeyboardInterrupt:
                interrupted = True
                _quiet_cluster(client, embedded=embedded)
                raise
            finally:
                if embedded and not interrupted and not _verbosity():
                    # the command has said (or is about to print) all it will; what
                    # workers log while the cluster closes (a heartbeat meeting the
                    # closed scheduler, with its traceback) would only bury that line
                    _quiet_workers(client)
    except OSError as exc:
        # an OSError of the command itself (a missing file) is not the scheduler's
        if (scheduler or scheduler_file) and not connected:
            raise click.ClickException(
                f"Could not reach the Dask scheduler {scheduler or scheduler_file}: {exc}. "
                "Check the address and that the scheduler is running."
            ) from exc
        raise


def _verbosity() -> int:
    """How many ``-v`` the command line gave (0 outside a command)."""
    ctx = click.get_current_context(silent=True)
    return int(ctx.find_root().params.get("verbose") or 0) if ctx is not None else 0


class _CancelRaceFilter(logging.Filter):
    """Drops the traceback of distributed's ``sync()`` cancelling a call not started yet.

    On Ctrl-C, ``distributed.utils.sync`` schedules a callback that cancels the pending
    call's future; when Ctrl-C lands before the loop has started that call, the future is
    not assigned yet and the callback raises NameError, which tornado logs with a
    traceback (distributed 2026.8). Nothing was running, so nothing is lost: the record
    is dropped and the CLI's one-line message stays the only output.
    """

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, NameError) and "'future'" in str(exc)
                    and "sync.<locals>.cancel" in record.getMessage())


_CANCEL_RACE = _CancelRaceFilter()


def _drop_distributed_cancel_race():
    """Install :class:`_CancelRaceFilter` for the rest of the process (idempotent).

    Never removed: the callback runs on the loop thread after Ctrl-C, possibly while the
    client is already closing, and a CLI process ends soon after.
    """
    logging.getLogger("tornado.application").addFilter(_CANCEL_RACE)


def _quiet_cluster(client, embedded):
    """After Ctrl-C: no log lines from this process or (embedded) workers as they close."""
    from .._worker_signals import quiet_distributed_logs

    quiet_distributed_logs()
    if embedded:  # a shared cluster's logs are its owner's
        _quiet_workers(client)


def _quiet_workers(client):
    """Silence distributed's logging in the workers (of an embedded cluster) before it closes."""
    from .._worker_signals import quiet_distributed_logs

    with contextlib.suppress(Exception):
        client.run(quiet_distributed_logs)


@click.group(name="dkrp", cls=_Group, context_settings={"help_option_names": ["-h", "--help"]},
             short_help="Distributed kernelized random projections on Dask (dkrp).")
@click.version_option(package_name="dkrp", message="dkrp %(version)s")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
def main(verbose):
    """Distributed kernelized random projections and random features on Dask.

    Convert data to a Zarr dataset store (ingest), featurize it into a resumable
    Zarr feature store on a Dask cluster (featurize), and inspect stores (info).
    Without --scheduler, featurize and demo start an embedded local cluster of
    worker processes bound to 127.0.0.1. Run `dkrp COMMAND --help` for details.

    \b
    Examples:
      dkrp ingest covtype.csv covtype.zarr --label-column Cover_Type --drop-column Id
      dkrp featurize covtype.zarr covtype-krp.zarr --n-components 2000 --scale-rows unit
      dkrp info covtype-krp.zarr
      dkrp verify covtype-krp.zarr --repair
      dkrp methods
      dkrp demo --dataset digits
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # distributed installs its own INFO handler when imported; keep the terminal to our
    # summary lines unless asked (it is imported here so its setup does not run later)
    import distributed  # noqa: F401

    for name in ("distributed", "dkrp"):
        logging.getLogger(name).setLevel(level)


def parse_float_or(name, value, word):
    if value is None or value == word:
        return value
    try:
        return float(value)
    except ValueError:
        raise click.BadParameter(
            f"must be a number or {word!r}, got {value!r}", param_hint=name
        ) from None

