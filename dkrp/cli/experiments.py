"""``dkrp experiment``: the papers' experiments (``dkrp.experiments``) and their report."""

from __future__ import annotations

import json
import time

import click

from ..experiments import EXPERIMENTS
from ._group import as_click_errors, cluster_client, cluster_options, main


def _parse_set(values):
    overrides = {}
    for item in values:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        try:
            overrides[key.replace("-", "_")] = json.loads(text)
        except ValueError:
            overrides[key.replace("-", "_")] = text
    return overrides


@main.command(short_help="Re-run a paper's experiment, or write results/REPRODUCTION.md.")
@click.argument("name", required=False, metavar="NAME",
                type=click.Choice([*EXPERIMENTS, "report"]))
@click.option("--list", "list_", is_flag=True, help="List the experiments and exit.")
@click.option("--profile", type=click.Choice(["quick", "full"]), default="quick",
              show_default=True,
              help="quick: small slices, minutes on 2 cores; full: the published tables.")
@click.option("--repeats", type=click.IntRange(min=1),
              help="Seeds per configuration (default: the profile's).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="First seed; repeat r uses seed + r.")
@click.option("--output", type=click.Path(file_okay=False), default="results",
              show_default=True,
              help="Parent folder: the run writes OUTPUT/NAME/ (full) or OUTPUT/NAME-quick/.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="Change one profile parameter (JSON value), e.g. --set 'datasets=[\"w8a\"]'.")
@click.option("--tag", help="Write OUTPUT/NAME-TAG/ (parts of one experiment side by side; "
                           "the report reads them all).")
@click.option("--overwrite", is_flag=True,
              help="Replace the result already in the folder: only the files dkrp wrote "
                   "there; your other files in it stay. Never a full result by a quick run.")
@click.option("--local", is_flag=True,
              help="Featurize in this process instead of on a Dask cluster.")
@cluster_options
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
def experiment(name, list_, profile, repeats, seed, output, settings, tag, overwrite, local,
               scheduler, scheduler_file, n_workers, memory_limit, quiet):
    """Run experiment NAME and write OUTPUT/NAME/: runs.csv (every run, with seeds,
    versions and machine), summary.md (mean ± std over repeats) and PNG plots.

    The profile is part of the folder's name unless it is full: a quick run writes
    OUTPUT/NAME-quick/ (OUTPUT/NAME-TAG-quick/ with --tag), so it never lands on the
    published tables in OUTPUT/NAME/. A folder that already holds a result is replaced
    only with --overwrite, and then only the files dkrp wrote in it (your notes beside
    them stay); a full result is never replaced by a quick run, and a folder dkrp did
    not write never at all. The new result is built beside the old one and swapped in
    when complete; the build folder of a failed run is removed by the next run.

    `dkrp experiment report` rebuilds OUTPUT/REPRODUCTION.md from the runs.csv files
    under OUTPUT: each number the papers publish beside ours, with a verdict.

    Data come from DKRP_DATA_DIR. Featurization runs on the embedded Dask cluster
    (or --scheduler); classifiers train in this process.

    \b
    Examples:
      dkrp experiment --list
      dkrp experiment distortion                  # writes results/distortion-quick/
      dkrp experiment distortion --overwrite      # replaces it
      dkrp experiment classification --profile full --repeats 5 --scheduler tcp://10.0.0.5:8786
      dkrp experiment report
    """
    if list_ or name is None:
        if name is None and not list_:
            raise click.UsageError("Name an experiment (or --list to see them).")
        width = max(map(len, EXPERIMENTS))
        for key, (_, summary) in EXPERIMENTS.items():
            click.echo(f"{key:<{width}}  {summary}")
        click.echo(f"{'report':<{width}}  results/REPRODUCTION.md from the runs under --output")
        return
    if name == "report":
        from ..experiments.report import write_report

        with as_click_errors():
            path = write_report(output)
        click.echo(f"wrote {path}")
        return
    from ..experiments import run_experiment
    from ..experiments._outputs import check_output

    overrides = _parse_set(settings)
    with as_click_errors():  # before a cluster starts
        check_output(name, profile=profile, output=output, tag=tag, overwrite=overwrite)
    t0 = time.perf_counter()

    def report(line):
        if not quiet:
            click.echo(f"[{time.perf_counter() - t0:7.1f} s] {line}", err=True)

    with as_click_errors():
        if local:
            if scheduler or scheduler_file or n_workers or memory_limit:
                raise click.UsageError("--local runs without a cluster; drop the cluster options.")
            folder = run_experiment(name, profile=profile, repeats=repeats, output=output,
                                    seed=seed, report=report, overrides=overrides, tag=tag,
                                    overwrite=overwrite)
        else:
            with cluster_client(scheduler, scheduler_file, n_workers, memory_limit,
                                quiet) as client:
                folder = run_experiment(name, profile=profile, repeats=repeats, output=output,
                                        seed=seed, client=client, report=report,
                                        overrides=overrides, tag=tag, overwrite=overwrite)
    click.echo((folder / "summary.md").read_text())
    click.echo(f"wrote {folder} in {time.perf_counter() - t0:.1f} s")
