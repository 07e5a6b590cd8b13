"""The ensemble commands: ``dkrp train`` (a voting ensemble of random-feature linear
SVMs on a labelled dataset store, saved to a model directory) and ``dkrp predict``
(predict and score a dataset store; optionally write the predictions to Zarr)."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import InvalidInputError
from ..methods import method_names
from ._confirm import parse_duration
from ._group import as_click_errors, cluster_client, cluster_options, main, parse_float_or


@main.command(short_help="Train a voting ensemble of random-feature linear SVMs.")
@click.argument("train_path", metavar="TRAIN.zarr", type=click.Path())
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Model directory to write (dkrp.json + voters.npz).")
@click.option("--method", type=click.Choice(method_names()), default="rff", show_default=True,
              help="Feature map of every voter (any method of `dkrp methods`).")
@click.option("--n-components", type=click.IntRange(min=1), default=500, show_default=True,
              help="Features per voter.")
@click.option("--gamma", help="Kernel width (a number or 'scale'; rff default: scale).")
@click.option("--C", "C", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True, help="Regularisation of the linear SVMs.")
@click.option("--voters", type=click.IntRange(min=1), default=13, show_default=True,
              help="Number of voters; 1 trains a single random-feature linear SVM.")
@click.option("--strategy", type=click.Choice(["full", "partition"]), default="full",
              show_default=True,
              help="full: every voter sees all rows; partition: one voter per row block.")
@click.option("--voting", type=click.Choice(["hard", "soft"]), default="hard",
              show_default=True, help="Majority vote (ties to the lowest label) or mean "
                                      "decision function.")
@click.option("--solver", type=click.Choice(["auto", "newton", "primal", "dual", "sgd"]),
              default="auto", show_default=True,
              help="Linear model: newton (dkrp's PrimalLinearSVC; what auto picks), LinearSVC "
                   "primal/dual (liblinear) or averaged SGD with hinge loss.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Ensemble seed; voter seeds derive from it.")
@click.option("--overwrite", is_flag=True, help="Replace a model already in --out.")
@cluster_options
@click.option("--retries", type=click.IntRange(min=0), default=0, show_default=True,
              help="Run a voter's task up to N more times when it raises (e.g. a transient I/O "
                   "error). Workers that die are handled by Dask itself "
                   "(distributed.scheduler.allowed-failures).")
@click.option("--confirm-above", metavar="DURATION", default="30min", show_default=True,
              callback=parse_duration,
              help="Ask before a training estimated to take longer than DURATION (e.g. 90s, "
                   "10min, 2h; 0 always asks). Without a terminal it is refused unless --yes.")
@click.option("--yes", "-y", is_flag=True, help="Start without asking (see --confirm-above).")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress bar (nor the estimated time before training starts).")
def train(train_path, out, method, n_components, gamma, C, voters, strategy, voting, solver,
          seed, overwrite, scheduler, scheduler_file, n_workers, memory_limit, retries,
          confirm_above, yes, quiet):
    """Train an ensemble of random-feature linear SVMs on the dataset store TRAIN.zarr.

    Labels come from the store. Voter i's feature map and SVM are seeded from
    --seed, so the same command gives the same model on any cluster. Prints a
    table of the voters (rows, solver, iterations, seconds) and writes --out.

    Before it starts, train times one voter on the first 1000 rows (on one core)
    and prints the estimated time; past --confirm-above it asks first. A bar
    counts the voters as they finish.

    Each voter is kept as it finishes in .OUT.partial beside --out (its arrays in
    .npz). When a voter fails, the others are finished first, and the same command
    again trains only the missing ones (the model is the one an uninterrupted run
    makes); a .OUT.partial of other options or data is refused. Once the model is
    saved, .OUT.partial is removed.

    \b
    Examples:
      dkrp train mnist.zarr --out model --method rff --n-components 500 --voters 13
      dkrp train big.zarr --out model --strategy partition --scheduler tcp://10.0.0.5:8786
      dkrp train mnist.zarr --out single --voters 1
    """
    from ..ensemble import RandomFeatureVotingClassifier, summary_lines
    from ..ensemble.checkpoint import JOB, Checkpoint
    from ..ensemble.persistence import check_save_target
    from ..ensemble.training import time_one_voter
    from ..io import open_dataset
    from ._confirm import cluster_cores, embedded_cores

    gamma = parse_float_or("--gamma", gamma, "scale")
    with as_click_errors():
        check_save_target(Path(out), overwrite)  # before training, not after
        ds = open_dataset(train_path)
        if ds.y is None:
            raise InvalidInputError(f"{train_path} has no labels: ingest it with its labels "
                                    "(--label-column, or --labels for IDX).")
        model = RandomFeatureVotingClassifier(
            n_voters=voters, method=method, n_components=n_components, gamma=gamma, C=C,
            estimator=solver, voting=voting, strategy=strategy, random_state=seed)
        timing = None if quiet and yes else time_one_voter(model, ds.X, ds.y)
        cores = embedded_cores(scheduler, scheduler_file, n_workers)
        if cores is not None:  # before the embedded cluster starts
            _announce_training(model, timing, cores, confirm_above, yes, quiet)
        with cluster_client(scheduler, scheduler_file, n_workers, memory_limit) as client:
            if cores is None:  # a running cluster: its cores are known now
                _announce_training(model, timing, cluster_cores(client), confirm_above,
                                   yes, quiet)
            partial = _partial_dir(Path(out))
            if not quiet and (partial / JOB).exists():
                click.echo(f"train: resuming the voters kept in {partial}", err=True)
            model.fit(ds.X, ds.y, client=client, progress=not quiet, retries=retries,
                      checkpoint=partial)
        path = model.save(out, overwrite=overwrite)
        Checkpoint(partial, None).remove()
    for line in summary_lines(model):
        click.echo(line)
    click.echo(f"trained {voters} voter(s) on {ds.X.shape[0]} rows in {model.fit_seconds_:.1f} s: "
               f"{Path(path).absolute()}")


def _partial_dir(out: Path) -> Path:
    """Where ``dkrp train --out OUT`` keeps its finished voters: ``.OUT.partial`` beside."""
    out = out.absolute()
    return out.with_name(f".{out.name}.partial")


def _announce_training(model, timing, cores, limit, yes, quiet):
    """Print the voters and the estimated time (unless --quiet); ask when the estimate is
    above --confirm-above (``limit`` seconds). ``timing``: :func:`dkrp.ensemble.training.
    time_one_voter`'s dict (None: no estimate, nothing to ask)."""
    from ..job_size import estimate_seconds
    from ._confirm import confirm, format_duration, on_cores

    n = model.n_voters
    if timing is None:
        if not quiet:
            click.echo(f"train: {n} voter(s) of {model.n_components} {model.method} "
                       "features; time not estimated (the first rows could not train a "
                       "voter)", err=True)
        return
    rows = timing["rows_per_voter"]
    seconds = estimate_seconds(n, timing["seconds"], cores)
    if not quiet:
        sample = (f"on all {rows} rows" if timing["sample_rows"] == rows else
                  f"on {timing['sample_rows']} sample rows, scaled linearly to {rows} rows")
        click.echo(f"train: {n} voter(s), each {model.n_components} {model.method} features "
                   f"and {timing['solver']} on {rows} rows; estimated "
                   f"{format_duration(seconds)} {on_cores(cores)} (one voter took "
                   f"{format_duration(timing['measured'])} on one core {sample}; an "
                   "estimate)", err=True)
    if seconds > limit:
        confirm(f"train is estimated to take {format_duration(seconds)} ({n} voter(s) "
                f"{on_cores(cores)})", f"--confirm-above {format_duration(limit)}", yes)


@main.command(short_help="Predict a dataset store with a trained ensemble; score it.")
@click.argument("model_dir", metavar="MODEL_DIR", type=click.Path(file_okay=False))
@click.argument("test_path", metavar="TEST.zarr", type=click.Path())
@click.option("--out", "out", type=click.Path(file_okay=False),
              help="Write the predictions to this Zarr store (array y_pred).")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out store.")
@cluster_options
@click.option("--retries", type=click.IntRange(min=0), default=0, show_default=True,
              help="Run a row block's task up to N more times when it raises (e.g. a transient I/O "
                   "error). Workers that die are handled by Dask itself "
                   "(distributed.scheduler.allowed-failures).")
def predict(model_dir, test_path, out, overwrite, scheduler, scheduler_file, n_workers,
            memory_limit, retries):
    """Predict TEST.zarr with the model in MODEL_DIR (lazy and parallel on the cluster).

    With labels in the store, prints the accuracy and macro-F1 of the ensemble
    and the accuracy of each voter, and warns when the labels include classes the
    model never saw (another encoding of the classes, say). A store without labels
    needs --out: the predictions are all there is to keep.

    \b
    Examples:
      dkrp predict model mnist-test.zarr
      dkrp predict model big-test.zarr --out pred.zarr --scheduler tcp://10.0.0.5:8786
    """
    from .. import load
    from ..ensemble import RandomFeatureVotingClassifier, evaluate, summary_lines
    from ..ensemble.scoring import unseen_classes_warning
    from ..io import open_dataset

    with as_click_errors():
        model = load(model_dir)
        if not isinstance(model, RandomFeatureVotingClassifier):
            raise InvalidInputError(f"{model_dir} holds a {type(model).__name__}, not a trained "
                                    "ensemble (dkrp train).")
        ds = open_dataset(test_path)
        if ds.y is None and out is None:
            raise click.UsageError(
                f"{test_path} has no labels, so there is nothing to score: pass --out "
                "PRED.zarr to keep the predictions (they would be computed and thrown away).")
        if out is not None:
            _check_predictions_out(Path(out), overwrite)
        with cluster_client(scheduler, scheduler_file, n_workers, memory_limit) as client:
            result = evaluate(model, ds.X, ds.y, client=client, retries=retries)
        if out is not None:
            _write_predictions(out, result["y_pred"], model_dir, test_path)
    for line in summary_lines(model, result):
        click.echo(line)
    n = len(result["y_pred"])
    warning = unseen_classes_warning(model, result)
    if warning:
        click.echo(f"warning: {warning}", err=True)
    if "accuracy" in result:
        click.echo(f"accuracy {result['accuracy']:.4f}  macro-F1 {result['macro_f1']:.4f}  "
                   f"({n} rows, {result['seconds']:.1f} s)")
    else:
        click.echo(f"predicted {n} rows in {result['seconds']:.1f} s (the store has no labels)")
    if out is not None:
        click.echo(f"predictions: {Path(out).absolute()}")


#: ``dkrp_format`` of the store ``dkrp predict --out`` writes
PREDICTIONS_FORMAT = "predictions"


def _check_predictions_out(out, overwrite):
    """Refuse an ``--out`` that exists, unless ``--overwrite`` and it is a predictions store
    dkrp wrote: a user's directory or file is never replaced (checked before predicting)."""
    from .._store import read_attrs

    if not out.exists():
        return
    if not overwrite:
        raise FileExistsError(f"{out} exists; pass --overwrite to replace it.")
    if (read_attrs(out) or {}).get("dkrp_format") != PREDICTIONS_FORMAT:
        raise FileExistsError(
            f"Refusing to replace {out}: it is not a predictions store written by dkrp "
            "predict (no zarr.json with dkrp_format='predictions'). Remove it yourself or "
            "choose another --out.")


def _write_predictions(out, y_pred, model_dir, test_path):
    """Write the predictions store beside ``out`` and swap it in once complete."""
    import zarr

    from .._store import publish_atomically, write_attrs

    with publish_atomically(Path(out), "predict") as tmp:
        group = zarr.open_group(str(tmp), mode="w-")
        group.create_array("y_pred", data=y_pred)
        write_attrs(group, {"dkrp_format": PREDICTIONS_FORMAT,
                            "model": str(Path(model_dir).absolute()),
                            "input": str(Path(test_path).absolute()), "complete": True})
