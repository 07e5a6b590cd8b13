"""What a run writes: ``OUTPUT/NAME[-TAG]/`` with ``runs.csv``, ``summary.md``, plots and
``experiment.json`` (``OUTPUT/NAME[-TAG]-PROFILE/`` for a profile other than ``full``).

The folder is built beside its final place (``OUTPUT/.FOLDER.partial-PID``) and
swapped in only when complete, so a killed run never leaves output that looks
complete. An existing result is replaced only when asked (``overwrite``), and then
only dkrp's own files in it: a user's notes beside them stay. A folder dkrp did not
write (no ``experiment.json`` made by ``dkrp experiment``) is never replaced, nor is a
``full`` result by a run of another profile. A build folder left by a failed run is
removed by the next run of the same folder once its process is gone.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import logging
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path

from ..errors import InvalidInputError, Message, Param
from ._protocol import PROFILES, RunContext

logger = logging.getLogger(__name__)

__all__ = ["MARKER", "check_output", "environment", "folder_name", "method_color", "run_and_write",
           "save_figure", "summary_frame", "summary_markdown"]

#: The file that marks a folder as written by ``dkrp experiment``
MARKER = "experiment.json"
_MAKER = "dkrp experiment"
#: The file that marks a build folder (``.FOLDER.partial-PID``) as dkrp's while it holds
#: only dkrp's files: its host and process id say when it is stale
_BUILD_MARKER = ".dkrp-build.json"


def environment() -> dict:
    """Versions and machine, recorded in every row of ``runs.csv``."""
    import dask
    import numpy
    import scipy
    import sklearn

    from .. import __version__

    return {
        "dkrp": __version__,
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "sklearn": sklearn.__version__,
        "dask": dask.__version__,
        "machine": f"{platform.machine()} {_cpu_model()}, {os.cpu_count()} cores",
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _git_commit() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here,
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def folder_name(name, profile="quick", tag=None) -> str:
    """The folder a run writes under ``output``: ``NAME[-TAG]``, or ``NAME[-TAG]-PROFILE``
    for a profile other than ``full``.

    The published tables are ``full`` runs; a ``quick`` look sits beside them
    (``results/spe-quick`` next to ``results/spe``) instead of in their place.
    """
    base = name if not tag else f"{name}-{tag}"
    return base if profile == "full" else f"{base}-{profile}"


def _marker(folder: Path):
    """The folder's ``experiment.json`` if ``dkrp experiment`` wrote it, else None."""
    try:
        meta = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("made_by") == _MAKER else None


def _check_replaceable(folder: Path, profile: str, overwrite: bool):
    """Refuse to replace ``folder`` unless it is dkrp's, ``overwrite`` is set and no
    ``full`` result would give way to another profile's; return its marker (None: absent)."""
    if not folder.exists():
        return None
    meta = _marker(folder)
    if meta is None:
        raise FileExistsError(Message(
            "{} exists and was not written by `dkrp experiment` (no {} of ours in it); dkrp "
            "never replaces a folder it did not create: choose another {} or move it away.",
            folder, MARKER, Param("output")))
    old = meta.get("profile")
    if old == "full" and profile != "full":
        raise FileExistsError(Message(
            "{} holds a {} result; a {} run never replaces it, even with {}: choose another "
            "{} or {}, or move the folder away.", folder, Param("profile", "full"),
            Param("profile", profile), Param("overwrite", True), Param("output"), Param("tag")))
    if not overwrite:
        raise FileExistsError(Message(
            "{} already holds a result of `dkrp experiment` (profile {}, started {}); pass {} "
            "to replace it (only the files dkrp wrote there are replaced), or choose another "
            "{} or {}.", folder, old, meta.get("started_utc", "?"), Param("overwrite", True),
            Param("output"), Param("tag")))
    return meta


def check_output(name, *, profile="quick", output="results", tag=None,
                 overwrite=False) -> Path:
    """The folder a run of experiment ``name`` would write, checked before any work.

    Parameters
    ----------
    name : str
        The experiment's name.
    profile, output, tag, overwrite
        As for :func:`run_and_write`.

    Returns
    -------
    Path
        ``output/`` :func:`folder_name`.

    Raises
    ------
    ValueError
        For a tag that is not letters, digits, '-' and '_'.
    FileExistsError
        When :func:`run_and_write` would refuse to replace the folder.
    """
    if tag and (not str(tag).replace("-", "").replace("_", "").isalnum()):
        raise InvalidInputError(f"tag must be letters, digits, '-' and '_', got {tag!r}.")
    final = Path(output) / folder_name(name, profile, tag)
    _check_replaceable(final, profile, overwrite)
    return final


def _own_files(meta) -> set:
    """The names of the files dkrp wrote in a result folder, from its marker."""
    names = meta.get("files")
    if not isinstance(names, list):  # a folder written before markers listed their files
        names = ["runs.csv", "summary.md", *(meta.get("plots") or [])]
    # a name with a path in it is not one dkrp wrote: never follow it out of the folder
    return {n for n in names if isinstance(n, str) and n not in ("", ".", "..")
            and Path(n).name == n} | {MARKER}


def _process_running(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid)


def _remove_stale_builds(parent: Path, name: str, report) -> None:
    """Remove the build folders ``.NAME.partial-PID`` of runs whose process is gone.

    Only a folder still marked as dkrp's build (:data:`_BUILD_MARKER`, written on this
    host by process PID) is removed: once a build has taken in a user's files on its
    way to replace a result, its marker is gone and it is left for the user.
    """
    for path in parent.glob(f".{name}.partial-*"):
        pid = path.name.rpartition("-")[2]
        if not pid.isdigit() or not path.is_dir():
            continue
        try:
            info = json.loads((path / _BUILD_MARKER).read_text())
        except (OSError, ValueError):
            continue
        if not (isinstance(info, dict) and info.get("made_by") == _MAKER
                and info.get("pid") == int(pid) and info.get("host") == socket.gethostname()):
            continue
        # this process's own earlier build: a run in it that failed
        if int(pid) != os.getpid() and _process_running(int(pid)):
            continue
        shutil.rmtree(path)
        report(f"removed {path}, left by a failed run (process {pid} has ended)")


def run_and_write(experiment, *, profile="quick", repeats=None, output="results", seed=0,
                  client=None, report=None, overrides=None, tag=None,
                  overwrite=False) -> Path:
    """Run ``experiment`` and write its folder ``output/<name>[-<tag>]/`` (``full``) or
    ``output/<name>[-<tag>]-<profile>/`` (another profile: :func:`folder_name`).

    The folder is built beside its place (``.FOLDER.partial-PID``) and swapped in when
    complete. A build folder of the same name left by a failed run whose process has
    ended is removed first.

    Parameters
    ----------
    experiment : Experiment
    profile : {"quick", "full"}
    repeats : int, optional
        Seeds per configuration (default: the profile's ``repeats``).
    output : path
        The parent folder (``results`` for the committed tables).
    seed : int
        The first seed.
    client : distributed.Client, optional
        Where featurization runs (see :meth:`RunContext.transform`).
    report : callable, optional
        Progress lines.
    overrides : dict, optional
        Profile parameters to change (``dkrp experiment --set key=value``).
    tag : str, optional
        Write ``output/<name>-<tag>/`` instead, so that parts of a large experiment
        (one dataset each, say) sit side by side; the report reads them all.
    overwrite : bool
        Replace a result already in the folder. Only the files dkrp wrote there are
        replaced; any other file in it (a user's notes) is kept in the new folder.

    Returns
    -------
    Path
        The completed folder.

    Raises
    ------
    FileExistsError
        Before the run, when the folder exists and was not written by ``dkrp
        experiment``, holds a result and ``overwrite`` is false, or holds a ``full``
        result and ``profile`` is another. When the new result would overwrite a file
        of the same name that dkrp did not write, after the run: the new result is
        then left in its build folder, which the message names.
    RuntimeError
        When the run yields no rows.
    """
    if profile not in PROFILES:
        raise InvalidInputError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}.")
    params = experiment.params(profile, overrides)
    repeats = int(params.get("repeats", 1) if repeats is None else repeats)
    if repeats < 1:
        raise InvalidInputError(f"repeats must be at least 1, got {repeats}.")
    report = report or (lambda line: None)
    final = check_output(experiment.name, profile=profile, output=output, tag=tag,
                         overwrite=overwrite)
    parent, name = final.parent, final.name
    parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(parent, name, report)
    partial = parent / f".{name}.partial-{os.getpid()}"
    if partial.exists():
        raise FileExistsError(
            f"{partial} is left from an earlier run and is not marked as dkrp's build (it "
            "may hold your files): look inside, move it away and rerun."
        )
    partial.mkdir()
    (partial / _BUILD_MARKER).write_text(json.dumps(
        {"made_by": _MAKER, "host": socket.gethostname(), "pid": os.getpid()}) + "\n")
    started = _dt.datetime.now(_dt.timezone.utc)
    env = environment()
    meta = {
        "made_by": _MAKER,
        "experiment": experiment.name,
        "tag": tag or "",
        "title": experiment.title,
        "profile": profile,
        "repeats": repeats,
        "seed": seed,
        "params": params,
        "overrides": dict(overrides or {}),
        "started_utc": started.isoformat(timespec="seconds"),
        "cluster": None if client is None else _describe_client(client),
        "notes": experiment.notes,
        **env,
    }
    ctx = RunContext(params=params, profile=profile, repeats=repeats, seed=seed,
                     client=client, report=report)
    try:
        rows = _write_rows(experiment, ctx, partial / "runs.csv",
                           {"experiment": experiment.name, "profile": profile, **env})
        if not rows:
            raise RuntimeError(f"experiment {experiment.name!r} produced no rows.")
        meta["finished_utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        meta["rows"] = len(rows)
        frame = _frame(rows)
        meta["plots"] = [p.name for p in _plots(experiment, frame, partial)]
        (partial / "summary.md").write_text(summary_markdown(experiment, frame, meta))
        meta["files"] = sorted({p.name for p in partial.iterdir()} - {_BUILD_MARKER}
                               | {MARKER})
        (partial / MARKER).write_text(json.dumps(meta, indent=2, default=str) + "\n")
    except BaseException:
        report(f"{experiment.name}: failed; partial rows kept in {partial} (not a result)")
        raise
    _swap_in(partial, final, profile, overwrite)
    report(f"{experiment.name}: wrote {final}")
    return final


def _describe_client(client) -> str:
    try:
        workers = client.scheduler_info()["workers"]
        threads = sum(w.get("nthreads", 0) for w in workers.values())
        return f"{len(workers)} workers, {threads} threads"
    except Exception:  # noqa: BLE001 - a description only
        return "unknown"


def _write_rows(experiment, ctx, path, constant):
    rows = []
    fields = None
    with open(path, "w", newline="") as fh:
        writer = None
        for row in experiment.run(ctx):
            row = {**row, **constant}
            if writer is None:
                fields = list(row)
                writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="raise")
                writer.writeheader()
            missing = [k for k in row if k not in fields]
            if missing:  # a later configuration measured more: widen the header
                fields += missing
                rows.append(row)
                fh.seek(0)
                fh.truncate()
                writer = csv.DictWriter(fh, fieldnames=fields)
                writer.writeheader()
                writer.writerows(rows)
            else:
                rows.append(row)
                writer.writerow(row)
            fh.flush()
    return rows


def _frame(rows):
    import pandas as pd

    return pd.DataFrame(rows)


def _plots(experiment, frame, folder):
    if experiment.plot is None:
        return []
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    try:
        return [Path(p) for p in experiment.plot(frame, folder)]
    finally:
        plt.close("all")


_COLORS: dict = {}


def method_color(method) -> str:
    """The same matplotlib colour for a method in every plot of a run."""
    return _COLORS.setdefault(method, f"C{len(_COLORS) % 10}")


def save_figure(fig, folder, name, dpi=100) -> Path:
    """Lay out, write ``folder/name`` and close ``fig``; return the path."""
    import matplotlib.pyplot as plt

    path = Path(folder) / name
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _swap_in(partial: Path, final: Path, profile: str, overwrite: bool) -> None:
    """Move the complete build ``partial`` to ``final``, taking along the files in an old
    ``final`` that dkrp did not write; the old folder's own files are then deleted."""
    # Past this point the build is a complete result, or takes in the user's files: without
    # its marker no later run removes it as stale, whatever happens before the swap is done.
    (partial / _BUILD_MARKER).unlink()
    try:
        meta = _check_replaceable(final, profile, overwrite)  # again: it may have appeared
    except FileExistsError as exc:
        raise FileExistsError(f"{exc} The new result is in {partial}.") from None
    if meta is None:
        partial.rename(final)
        return
    ours = _own_files(meta)
    kept = sorted(p.name for p in final.iterdir() if p.name not in ours)
    clash = [n for n in kept if (partial / n).exists()]
    if clash:
        raise FileExistsError(
            f"{final} holds {', '.join(clash)}, which dkrp did not write, and the new "
            f"result has files of the same name; nothing was replaced. The new result is "
            f"in {partial}: rename those files, then move it into place yourself."
        )
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    final.rename(old)
    for name in kept:
        (old / name).rename(partial / name)
    partial.rename(final)
    for name in ours:
        path = old / name
        if path.is_file() or path.is_symlink():
            path.unlink()
    try:
        old.rmdir()
    except OSError:  # something appeared in it meanwhile: not ours to delete
        logger.warning("kept %s: it holds files dkrp did not write", old)


def summary_frame(experiment, frame):
    """Mean, std and count of each metric per configuration (a pandas ``DataFrame``)."""
    keys = [c for c in experiment.config_columns if c in frame.columns]
    metrics = [c for c in experiment.metric_columns if c in frame.columns]
    if not metrics:
        return frame.iloc[:0]
    filled = (frame[keys].astype(object).fillna("-").astype(str).replace("", "-")
              if keys else None)
    data = frame[metrics].apply(lambda col: col.astype(float))
    if keys:
        data = data.assign(**{k: filled[k] for k in keys})
        grouped = data.groupby(keys, sort=False)
    else:
        grouped = data.assign(_all="all").groupby("_all")
    return grouped[metrics].agg(["mean", "std", "count"])


def _cell(mean, std, count, digits):
    if mean != mean:  # NaN: not measured for this configuration
        return "-"
    spec = digits if isinstance(digits, str) else f".{digits}f"
    text = f"{mean:{spec}}"
    if count > 1 and std == std:
        text += f" ± {std:{spec}}"
    return text


def _digits(metric):
    if metric in ("mse", "max_error"):  # errors span decades: significant digits
        return ".3g"
    if "seconds" in metric:
        return 3
    if metric in ("accuracy", "cv_accuracy", "test_accuracy", "balanced_accuracy"):
        return 2
    return 4


def summary_markdown(experiment, frame, meta) -> str:
    """``summary.md``: what ran, then one row per configuration, metrics as mean ± std."""
    table = summary_frame(experiment, frame)
    keys = [c for c in experiment.config_columns if c in frame.columns]
    metrics = [c for c in experiment.metric_columns if c in frame.columns]
    lines = [
        f"# {experiment.name}: {experiment.title}",
        "",
        f"Profile `{meta['profile']}`, {meta['repeats']} repeat(s) from seed {meta['seed']}; "
        f"dkrp {meta['dkrp']} ({meta['git_commit'] or 'no git'}), numpy {meta['numpy']}, "
        f"scikit-learn {meta['sklearn']}, dask {meta['dask']}; {meta['machine']}; "
        f"started {meta['started_utc']}, finished {meta.get('finished_utc', '?')}"
        + (f"; cluster: {meta['cluster']}" if meta.get("cluster") else "; no cluster") + ".",
        "",
        f"Re-run: `dkrp experiment {experiment.name} --profile {meta['profile']} "
        f"--repeats {meta['repeats']} --seed {meta['seed']}"
        + "".join(f" --set '{k}={json.dumps(v)}'" for k, v in meta.get("overrides", {}).items())
        + (f" --tag {meta['tag']}" if meta.get("tag") else "")
        + "`",
        "",
    ]
    if experiment.notes:
        lines += [experiment.notes, ""]
    if meta.get("overrides"):
        changed = " ".join(f"--set {k}={json.dumps(v)}" for k, v in meta["overrides"].items())
        lines += [f"Changed from the profile: `{changed}` (the full parameters are in "
                  f"{MARKER}).", ""]
    lines += ["Cells: mean ± standard deviation over the repeats.", ""]
    lines.append("| " + " | ".join(keys + metrics + ["n"]) + " |")
    lines.append("|" + "---|" * (len(keys) + len(metrics) + 1))
    for index, values in table.iterrows():
        index = index if isinstance(index, tuple) else (index,)
        cells = [str(v) for v in index] if keys else []
        count = 0
        for m in metrics:
            mean, std, n = values[(m, "mean")], values[(m, "std")], int(values[(m, "count")])
            count = max(count, n)
            cells.append(_cell(mean, std, n, _digits(m)))
        lines.append("| " + " | ".join(cells + [str(count)]) + " |")
    if experiment.tables is not None:
        lines += ["", experiment.tables(frame).rstrip()]
    plots = meta.get("plots") or []
    if plots:
        lines += ["", "Plots: " + ", ".join(f"[{p}]({p})" for p in plots)]
    return "\n".join(lines) + "\n"
