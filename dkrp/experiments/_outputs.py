"""What a run writes: ``OUTPUT/NAME/`` with ``runs.csv``, ``summary.md``, plots and
``experiment.json``.

The folder is built beside its final place (``OUTPUT/.NAME.partial-PID``) and
swapped in only when complete, so a killed run never leaves output that looks
complete, and a folder dkrp did not write (no ``experiment.json`` made by
``dkrp experiment``) is never replaced.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import logging
import os
import platform
import shutil
import subprocess
from pathlib import Path

from ._protocol import PROFILES, RunContext

logger = logging.getLogger(__name__)

__all__ = ["MARKER", "environment", "method_color", "run_and_write", "save_figure",
           "summary_frame", "summary_markdown"]

#: The file that marks a folder as written by ``dkrp experiment``
MARKER = "experiment.json"
_MAKER = "dkrp experiment"


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


def _check_replaceable(folder: Path) -> None:
    if not folder.exists():
        return
    marker = folder / MARKER
    try:
        made_by = json.loads(marker.read_text()).get("made_by")
    except (OSError, ValueError, AttributeError):
        made_by = None
    if made_by != _MAKER:
        raise FileExistsError(
            f"{folder} exists and was not written by `dkrp experiment` (no {MARKER} of "
            "ours in it); dkrp never replaces a folder it did not create: choose another "
            "--output or move it away."
        )


def run_and_write(experiment, *, profile="quick", repeats=None, output="results", seed=0,
                  client=None, report=None, overrides=None, tag=None) -> Path:
    """Run ``experiment`` and write its folder ``output/<name>/``.

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

    Returns
    -------
    Path
        The completed folder.

    Raises
    ------
    FileExistsError
        When ``output/<name>`` exists and was not written by ``dkrp experiment``.
    RuntimeError
        When the run yields no rows.
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}.")
    params = experiment.params(profile, overrides)
    repeats = int(params.get("repeats", 1) if repeats is None else repeats)
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}.")
    report = report or (lambda line: None)
    parent = Path(output)
    folder_name = experiment.name if not tag else f"{experiment.name}-{tag}"
    if tag and (not str(tag).replace("-", "").replace("_", "").isalnum()):
        raise ValueError(f"tag must be letters, digits, '-' and '_', got {tag!r}.")
    final = parent / folder_name
    _check_replaceable(final)
    parent.mkdir(parents=True, exist_ok=True)
    partial = parent / f".{folder_name}.partial-{os.getpid()}"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()
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
        (partial / MARKER).write_text(json.dumps(meta, indent=2, default=str) + "\n")
    except BaseException:
        report(f"{experiment.name}: failed; partial rows kept in {partial} (not a result)")
        raise
    _swap_in(partial, final)
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


def _swap_in(partial: Path, final: Path) -> None:
    old = None
    if final.exists():
        _check_replaceable(final)  # again: it may have appeared while we ran
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        final.rename(old)
    partial.rename(final)
    if old is not None:
        shutil.rmtree(old)


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
