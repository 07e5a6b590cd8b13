"""``dkrp demo``: KRP and RFF features against a linear SVM on the raw inputs, end to end
(dataset store, feature stores, training) on a Dask cluster, as one table."""

from __future__ import annotations

import contextlib
import signal

import click

from ..demo import DEMO_DATASETS
from ._group import as_click_errors, cluster_client, cluster_options, main


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM (``kill``, ``timeout``) ends the command as Ctrl-C does, so ``finally`` blocks
    (the demo's temporary directory) run instead of the process vanishing."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (e.g. under a test runner's thread)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@main.command(short_help="Compare KRP, RFF and raw linear SVMs on a dataset, end to end.")
@click.option("--dataset",
              type=click.Choice(DEMO_DATASETS),
              default="digits", show_default=True,
              help="digits ships with scikit-learn; the others are read from DKRP_DATA_DIR.")
@click.option("--workdir", type=click.Path(file_okay=False),
              help="Keep the Zarr stores here (default: a temporary directory).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--max-train", type=click.IntRange(min=10), help="Subsample the training rows.")
@cluster_options
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
def demo(dataset, workdir, seed, max_train, scheduler, scheduler_file, n_workers, memory_limit,
         quiet):
    """Featurize a dataset with KRP and RFF on a Dask cluster, train linear SVMs, compare.

    Runs the whole pipeline (dataset store, feature stores, training) and prints
    the accuracy and time of each model beside a linear SVM on the raw inputs.

    \b
    Examples:
      dkrp demo
      dkrp demo --dataset mnist --max-train 20000 --workdir demo-stores
      dkrp demo --dataset covtype --scheduler tcp://10.0.0.5:8786
    """
    import time

    from ..demo import run_demo

    t0 = time.perf_counter()

    def report(line):
        if not quiet:
            click.echo(f"demo [{time.perf_counter() - t0:6.1f} s]: {line}...", err=True)

    with _terminate_as_interrupt(), as_click_errors(), contextlib.ExitStack() as stack:
        started = []

        def client():
            # the cluster starts at the first featurize, once the data have loaded: a
            # missing dataset is said at once, not after the workers' start-up
            if not started:
                started.append(stack.enter_context(cluster_client(
                    scheduler, scheduler_file, n_workers, memory_limit, quiet)))
            return started[0]

        # a temporary workdir is removed on the way out, Ctrl-C and `kill` included
        rows = run_demo(dataset, client=client, workdir=workdir, seed=seed,
                        max_train=max_train, progress=not quiet, report=report)
    click.echo(f"dkrp demo on {dataset}: {rows[0]['note']}")
    header = f"{'model':<48} {'features':>8} {'accuracy':>8} {'featurize s':>11} {'train s':>8}"
    click.echo(header)
    click.echo("-" * len(header))
    for row in rows:
        k = "-" if row["n_features"] is None else str(row["n_features"])
        click.echo(
            f"{row['model']:<48} {k:>8} {row['accuracy']:>8.4f} "
            f"{row['featurize_seconds']:>11.2f} {row['train_seconds']:>8.2f}"
            + ("" if row.get("converged", True) else " *")
        )
    if not all(row.get("converged", True) for row in rows):
        click.echo("* LinearSVC stopped at its iteration cap before converging")
    click.echo(f"total {time.perf_counter() - t0:.1f} s")
