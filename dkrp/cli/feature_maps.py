"""The feature-map commands: ``dkrp featurize`` (a dataset into a resumable feature
store on a Dask cluster, with Ctrl-C and resume reporting) and ``dkrp methods`` (the
``--method`` feature maps and the featurize flags each takes)."""

from __future__ import annotations

import contextlib
import logging
import sys
import time

import click

from .._choices import (
    COMPRESSORS,
    DISTRIBUTIONS,
    EXPLICIT_FORMS,
    FLOAT_DTYPE_NAMES,
    INDEX_DESIGNS,
    POOLS,
    SCALE_ROWS,
    STORE_DTYPE_NAMES,
)
from ..errors import InvalidInputError
from ..methods import method_names
from ._confirm import parse_size
from ._group import (
    as_click_errors,
    cli_wording,
    cluster_client,
    cluster_options,
    main,
    parse_float_or,
)


class _FeaturizeCommand(click.Command):
    """``featurize --help`` shows, beside each method option, its default per method (read
    from the classes' signatures when help is asked for, so ``dkrp --help`` stays fast)."""

    def format_options(self, ctx, formatter):
        defaults = method_defaults()
        records = []
        for param in self.get_params(ctx):
            if not isinstance(param, click.Option):
                continue
            record = param.get_help_record(ctx)
            if record is not None and defaults.get(param.name):
                record = (record[0], f"{record[1]}  [default: {defaults[param.name]}]")
            if record is not None:
                records.append(record)
        if records:
            with formatter.section("Options"):
                formatter.write_dl(records)


@main.command(cls=_FeaturizeCommand,
              short_help="Featurize a dataset into a resumable Zarr feature store.")
@click.argument("input_path", metavar="IN", type=click.Path())
@click.argument("output", metavar="OUT.zarr", type=click.Path(file_okay=False))
@click.option("--method", type=click.Choice(method_names()), default="krp", show_default=True,
              help="Feature map.")
@click.option("--degree", type=click.IntRange(min=1), help="Polynomial kernel degree g.")
@click.option("--n-components", type=click.IntRange(min=1),
              help="Output dimension k (for nystroem also the number of landmarks).")
@click.option("--n-hyperplanes", type=click.IntRange(min=1),
              help="Pool size p: hyperplanes for krp, landmarks for kg-rp.")
@click.option("--n-terms", type=click.IntRange(min=1),
              help="Product terms t per component (krp, prp), landmarks per direction (kg-rp).")
@click.option("--distribution", type=click.Choice(DISTRIBUTIONS),
              help="Distribution of the hyperplane entries (krp, explicit, prp).")
@click.option("--density", help="Achlioptas density 1/s (a number or 'auto').")
@click.option("--pool", type=click.Choice(POOLS),
              help="How the hyperplane pool is built (krp; rff takes iid, orthogonal, "
                   "structured): iid rows as in the paper (default), orthogonal blocks, a "
                   "tight frame, or structured Hadamard blocks (fast Walsh-Hadamard transform).")
@click.option("--index-design", type=click.Choice(INDEX_DESIGNS),
              help="How krp components pick pool rows: random subsets (default) or balanced "
                   "(every pool row used equally often).")
@click.option("--form", type=click.Choice(EXPLICIT_FORMS),
              help="explicit only: project x^{⊗g} (tensor, d^g columns, the paper's) or each "
                   "distinct monomial once, weighted (monomials, C(d+g-1, g) columns: half the "
                   "cost at g=2, the same distribution of Gaussian features).")
@click.option("--kernel",
              help="Kernel for methods that take one: homogeneous_polynomial, polynomial, "
                   "gaussian or laplacian (see `dkrp methods`).")
@click.option("--gamma", help="Kernel width (a number or 'scale').")
@click.option("--scale", type=float,
              help="srf: the polynomial kernel's a >= 2, (1 - ||x - y||^2 / a^2)^degree.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Random seed; the same seed gives the same features on any cluster.")
@click.option("--dtype", type=click.Choice(FLOAT_DTYPE_NAMES),
              help="Dtype the map computes in, and the store holds unless --store-dtype "
                   "(default: float32 for float32 input, else float64).")
@click.option("--store-dtype", type=click.Choice(STORE_DTYPE_NAMES),
              help="Store the features in this dtype: float16 halves a float32 store (MNIST "
                   "KRP: accuracy measured in the README); a value above 65504 fails the "
                   "job, naming its row.")
@click.option("--bits", is_flag=True,
              help="spe only: store the signs of the sketch packed 8 to a byte (uint8, "
                   "m/8 bytes per row, 32x smaller than float32); decode with "
                   "dkrp.unpack_bits.")
@click.option("--compressor", type=click.Choice(COMPRESSORS), default="none",
              show_default=True,
              help="Codec of each stored chunk (random features barely compress: sizes and "
                   "times in the README).")
@click.option("--standardize", is_flag=True,
              help="Scale each input column to mean 0, variance 1 before the map; the "
                   "statistics are learnt on IN (one pass) and stored in the spec, so --like "
                   "scales test data with them. See `dkrp methods` for which maps want it.")
@click.option("--scale-rows", type=click.Choice(SCALE_ROWS),
              help="Divide each row (after --standardize) by its Euclidean norm before the "
                   "map; stored in the spec like --standardize.")
@click.option("--like", "like", metavar="FEATURES.zarr",
              type=click.Path(exists=True, file_okay=False),
              help="Apply the fitted map (and scaling) of this feature store, e.g. the "
                   "training features, to IN: nothing is refitted. Takes no method options.")
@click.option("--spec", "spec_path", metavar="SPEC.json",
              type=click.Path(exists=True, dir_okay=False),
              help="Apply the fitted map saved in SPEC.json (est.save(...), or "
                   "`dkrp info --spec STORE > SPEC.json`). Takes no method options.")
@cluster_options
@click.option("--retries", type=click.IntRange(min=0), default=0, show_default=True,
              help="Run a partition's task up to N more times when it raises (e.g. a "
                   "transient I/O error). Workers that die are handled by Dask itself "
                   "(distributed.scheduler.allowed-failures).")
@click.option("--overwrite", is_flag=True,
              help="Replace a feature store made by another spec or input (default: refuse). "
                   "Only a dkrp feature store is ever replaced, never IN, a dataset store or "
                   "other files; the new store is built beside it and swapped in once complete.")
@click.option("--chunk-rows", type=click.IntRange(min=1),
              help="Rows per output chunk (one task each) of a new store. Default: the "
                   "input's chunks if their output is at most 64 MiB, else whole 2048-row "
                   "blocks up to 64 MiB, smaller if a task would not fit a worker's memory.")
@click.option("--dry-run", is_flag=True,
              help="Print the output's shape, bytes, chunks and memory per task, then exit "
                   "(nothing fitted, started or written).")
@click.option("--confirm-above", metavar="SIZE", default="10GiB", show_default=True,
              callback=parse_size,
              help="Ask before writing more than SIZE (e.g. 500MiB, 2TB; 0 always asks). "
                   "Without a terminal such a job is refused unless --yes.")
@click.option("--yes", "-y", is_flag=True, help="Start without asking (see --confirm-above).")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress bar or progress lines (nor the job's size and estimated "
                   "time before it starts).")
def featurize(input_path, output, method, degree, n_components, n_hyperplanes, n_terms,
              distribution, density, pool, index_design, form, kernel, gamma, scale, seed, dtype,
              store_dtype, bits, compressor, standardize, scale_rows, like, spec_path,
              scheduler, scheduler_file, n_workers, memory_limit, retries, overwrite,
              chunk_rows, dry_run, confirm_above, yes, quiet):
    """Featurize IN (dataset store, .npy or Parquet) into the resumable feature store OUT.zarr.

    Only the method's seed and parameters (a JSON spec of a few KB) go to the
    workers; each regenerates the hyperplanes, checks their checksum and writes its
    own chunks. The same seed gives the same features on any cluster. Re-running
    the same command after a crash writes only the missing chunks; on a finished
    store it is a no-op; a store made by another spec or input is refused unless
    --overwrite. Data-dependent methods (nystroem, kg-rp, pca) first make exactly
    one pass over IN to fit. `dkrp methods` lists the methods and their options.

    To featurize a test set with the map fitted on the training set (same landmarks,
    same scaling), pass --like TRAIN-FEATURES.zarr (or --spec SPEC.json) instead of
    the method options. The labels of IN, if any, are copied into OUT.zarr
    (dkrp.read_features reads both).

    \b
    Examples:
      dkrp featurize covtype.zarr krp.zarr --degree 2 --standardize --scale-rows unit
      dkrp featurize mnist.zarr sorf.zarr --pool structured --n-hyperplanes 1024 --n-terms 30 \\
           --scale-rows unit
      dkrp featurize x.npy rff.zarr --method rff --gamma scale --dtype float32
      dkrp featurize mnist.zarr nys.zarr --method nystroem --kernel polynomial --degree 3 \\
           --scale-rows unit
      dkrp featurize mnist-test.zarr nys-test.zarr --like nys.zarr
      dkrp featurize covtype.zarr rff.zarr --method rff --gamma 0.05 --standardize
      dkrp featurize mnist.zarr spe-bits.zarr --method spe --n-components 4096 --bits \\
           --scale-rows unit
      dkrp featurize mnist.zarr krp16.zarr --dtype float32 --store-dtype float16 \\
           --scale-rows unit
      dkrp featurize big.zarr out.zarr --scale-rows unit --scheduler tcp://10.0.0.5:8786 \\
           --retries 2
    """
    from ..feature_store import StoreOptions
    from ..jobs import JobHooks
    from ..methods import fit_pass_message
    from ..preprocessing import ScalingOptions
    from ._confirm import embedded_cores

    started = time.perf_counter()
    fitted_from = like or spec_path
    if like and spec_path:
        raise click.UsageError("Pass --like or --spec, not both.")
    if fitted_from:
        _refuse_method_options(click.get_current_context(), "--like" if like else "--spec")
    elif bits and method != "spe":
        raise click.ClickException(f"--bits stores the packed sign bits of --method spe; "
                                   f"--method {method} has none: drop --bits, or use --method "
                                   "spe.")
    if bits and store_dtype:
        raise click.ClickException("--bits stores packed uint8 signs: drop --store-dtype or "
                                   "--bits.")
    density = parse_float_or("--density", density, "auto")
    gamma = parse_float_or("--gamma", gamma, "scale")

    def on_fit(projector, seconds):
        if quiet:
            return
        if seconds is None:
            what = [fit_pass_message(method, projector)] if projector.data_dependent else []
            if standardize:
                what.append("--standardize: learning each column's mean and standard "
                            "deviation in one pass")
            click.echo(f"fit: {'; '.join(what)} on {input_path}...", err=True)
        else:
            click.echo(f"fit: done in {seconds:.1f} s; the map is fitted on {input_path}. "
                       f"Apply it to other data (e.g. a test set) with: dkrp featurize "
                       f"TEST.zarr TEST-OUT.zarr --like {output}", err=True)

    planned = {}
    try:
        options = dict(degree=degree, n_components=n_components,
                       n_hyperplanes=n_hyperplanes, n_terms=n_terms, distribution=distribution,
                       density=density, pool=pool, index_design=index_design, form=form,
                       kernel=kernel, gamma=gamma, scale=scale, random_state=seed)
        with as_click_errors():
            # the job's options, once: what the store holds, the scaling, the hooks
            store = StoreOptions(dtype=dtype, bits=bits, store_dtype=store_dtype,
                                 compressor=compressor, chunk_rows=chunk_rows)
            # beside --like/--spec, --standardize and --scale-rows were refused above
            scaling = ScalingOptions(standardize=standardize, scale_rows=scale_rows)
        hooks = JobHooks(
            progress=not quiet, on_fit=on_fit, on_plan=lambda plan: planned.update(plan=plan),
            on_size=_announcer(quiet, confirm_above, yes,
                               embedded_cores(scheduler, scheduler_file, n_workers)),
            on_warning=lambda line: click.echo(f"warning: {cli_wording(line)}", err=True))

        def cluster():
            return cluster_client(scheduler, scheduler_file, n_workers, memory_limit, quiet)

        summary = _featurize_job(input_path, output, method, options, cluster, quiet=quiet,
                                 fitted_from=fitted_from, store=store, scaling=scaling,
                                 hooks=hooks, overwrite=overwrite, retries=retries,
                                 dry_run=dry_run)
    except KeyboardInterrupt:
        _interrupted(planned)
    except Exception as exc:
        leftover = _unfinished_replacement(planned)
        if leftover is None:
            raise
        from ._group import error_message

        clicked = isinstance(exc, click.ClickException)
        message = exc.format_message() if clicked else error_message(exc)
        raise click.ClickException(f"{message} {leftover}") from (
            exc.__cause__ if clicked else exc)
    if dry_run:
        from ..job_size import format_bytes

        total = summary["bytes"]
        click.echo(f"dry run: {summary['path']} would hold {_output_text(summary)} = "
                   f"{format_bytes(total) if total is not None else '?'} in "
                   f"{summary['n_chunks']} chunks of {summary['chunk_rows']} rows; one task "
                   f"needs about {format_bytes(summary['task_memory'])}. Nothing was written.")
        if summary.get("refusal"):
            click.echo(f"The real run would stop: {cli_wording(summary['refusal'])}")
        return
    click.echo(_summary_line(summary, time.perf_counter() - started))


def _output_text(size):
    """``N x K float64 features`` (or packed sign bits) of :func:`dkrp.jobs.size_job`."""
    n, k = size["shape"]
    return (f"{n} x {k} sign bits packed as uint8" if size.get("bits") else
            f"{n} x {k} {size['dtype']} features")


def _announcer(quiet, limit, yes, cores):
    """``on_size`` for :func:`dkrp.jobs.featurize_to_store`: print the job's size and
    estimated time (unless --quiet), then ask when it writes more than --confirm-above
    (``limit`` bytes); ``cores`` of the embedded cluster, None for a running scheduler."""
    from ..job_size import estimate_seconds, format_bytes
    from ._confirm import confirm, format_duration, on_cores

    def on_size(size, measure):
        left = size["bytes_to_write"]
        if left is None or size["chunks_to_write"] == 0:
            return  # a finished store (the run says so), or a width known only once fitted
        total = size["bytes"]
        if not quiet:
            chunks = size["chunks_to_write"]
            where = (f"{format_bytes(left)} to write in {chunks} chunk{'s' * (chunks != 1)}"
                     if left == total else f"{format_bytes(left)} of it left to write in "
                     f"{chunks} of {size['n_chunks']} chunks")
            click.echo(f"featurize: {size['path']} will hold {_output_text(size)} = "
                       f"{format_bytes(total)}; {where} of {size['chunk_rows']} rows; "
                       f"{_time_text(size, measure(), cores)}", err=True)
        if left > limit:
            confirm(f"featurize would write {format_bytes(left)} to {size['path']}",
                    f"--confirm-above {format_bytes(limit)}", yes)

    def _time_text(size, rate, cores):
        if rate is None:
            return "time not estimated (the map could not be timed on a sample of the input)"
        per_chunk = min(size["chunk_rows"], size["rows_to_write"]) / rate["rows_per_second"]
        seconds = estimate_seconds(size["chunks_to_write"], per_chunk, cores or 1)
        measured = (f"{rate['rows_per_second']:,.0f} rows/s measured on one core over "
                    f"{rate['sample_rows']} sample rows")
        if cores is None:
            return (f"estimated {format_duration(seconds)} of computing on one core, shared "
                    f"among the cluster's cores ({measured}; the fit and disk writes not "
                    "included)")
        return (f"estimated {format_duration(seconds)} {on_cores(cores)} ({measured}; the "
                "fit and disk writes not included)")

    return on_size


def _summary_line(summary, wall_seconds):
    """The closing line: the work's time and rate, and the whole command's wall time (the
    cluster's start included); a rerun on a finished store says there was nothing to do."""
    what = (f"{summary['n_components']} sign bits (packed, {(summary['n_components'] + 7) // 8}"
            " bytes per row)" if summary.get("encoding") == "bits" else
            f"{summary['n_components']} {summary['dtype']} features")
    if summary["chunks_written"] == 0:
        return (f"nothing to do (store complete): {summary['path']} already holds "
                f"{summary['rows']} rows x {what} ({summary['chunks_skipped']} chunks); "
                f"{wall_seconds:.1f} s wall")
    rows, seconds = summary["rows"], summary["seconds"]
    return (
        f"featurized {rows} rows -> {what} in "
        f"{seconds:.1f} s of work ({summary['rows_per_second']:,.0f} rows/s; "
        f"{summary['chunks_written']} chunks written, {summary['chunks_skipped']} already done), "
        f"{wall_seconds:.1f} s wall including the cluster's start: {summary['path']}"
    )


#: featurize's parameters that choose or fit a map: refused beside --like/--spec
_METHOD_PARAMS = ("method", "degree", "n_components", "n_hyperplanes", "n_terms",
                  "distribution", "density", "pool", "index_design", "form", "kernel", "gamma",
                  "scale",
                  "seed", "standardize", "scale_rows")


def _refuse_method_options(ctx, flag):
    """A map taken from a store or spec file comes whole: refuse options that would change it."""
    from click.core import ParameterSource

    given = [p for p in ctx.command.params
             if p.name in _METHOD_PARAMS
             and ctx.get_parameter_source(p.name) not in (ParameterSource.DEFAULT, None)]
    if given:
        names = ", ".join(p.opts[0] for p in given)
        raise click.UsageError(
            f"{flag} applies a map that is already fitted, with its own method, parameters, "
            f"seed and scaling; drop {names}.")


def _unfinished_replacement(planned):
    """After a failed --overwrite: what the hidden sibling it left is, and what to do with
    it (None when the run left none)."""
    plan = planned.get("plan")
    if plan is None or not plan.get("replace") or not plan["build_path"].exists():
        return None
    build, path = plan["build_path"], plan["path"]
    return (f"{build} holds the unfinished replacement of {path} (which is unchanged): "
            "once the cause is fixed, the same command finishes it and swaps it in; or "
            f"delete {build} to keep {path} as it is.")


def _interrupted(planned):
    """Ctrl-C: one line saying how far the run got and how to resume; exit status 130."""
    # the cluster is closed by now; whatever distributed says while it goes is noise here
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    plan = planned.get("plan")
    if plan is None:
        click.echo("Interrupted before any chunk was written.", err=True)
        sys.exit(130)
    from ..feature_store.format import done_chunks

    build, n_chunks = plan["build_path"], plan["attrs"]["n_chunks"]
    try:
        done = int(done_chunks(build, n_chunks).sum()) if build.exists() else 0
    except Exception:  # noqa: BLE001 - the count is a courtesy; the hint matters
        done = "?"
    where = (f"{build} (the replacement of {plan['path']}, which is unchanged)"
             if plan.get("replace") else str(build))
    click.echo(f"Interrupted: {done} of {n_chunks} chunks done in {where}. Run the same "
               "command again to resume.", err=True)
    sys.exit(130)


def _fitted_projector(path):
    """The fitted projector of a feature store (``--like``) or a saved spec (``--spec``)."""
    from pathlib import Path

    from .._spec import load
    from .._store import read_attrs
    from ..base import BaseProjector
    from ..feature_store.format import FEATURES_FORMAT, done_chunks

    path = Path(path)
    if path.is_dir():
        attrs = read_attrs(path)
        if attrs is None or attrs.get("dkrp_format") != FEATURES_FORMAT:
            raise InvalidInputError(f"--like {path}: not a dkrp feature store (give the features "
                                    "made from the training set, not a dataset store).")
        if attrs.get("complete") is not True:
            n_chunks = int(attrs.get("n_chunks", 0))
            try:
                done = int(done_chunks(path, n_chunks).sum())
            except Exception:  # noqa: BLE001 - the count is a courtesy; the refusal matters
                done = "?"
            raise InvalidInputError(
                f"--like {path}: the feature store is incomplete (its featurize run did not "
                f"finish: {done} of {n_chunks} chunks written). Finish it first: run the "
                f"featurize command that made it again (`dkrp verify {path}` checks what it "
                "holds).")
        from .._spec import from_spec

        return from_spec(attrs["spec"])
    projector = load(path)
    if not isinstance(projector, BaseProjector):
        raise InvalidInputError(f"--spec {path}: holds a {type(projector).__name__}, not a "
                                "projector spec.")
    return projector


def _featurize_job(input_path, output, method, options, cluster, *, quiet, fitted_from,
                   store, scaling, hooks, overwrite, retries, dry_run):
    """Make (or load) the map and run :func:`dkrp.featurize_to_store` with the options
    parsed once by ``featurize``; ``cluster()`` is a context manager of its client."""
    from ..jobs import featurize_to_store
    from ..methods import make_projector

    with as_click_errors(), contextlib.ExitStack() as stack:
        if fitted_from:
            projector = _fitted_projector(fitted_from)
            if not quiet:
                from ..preprocessing import describe

                click.echo(f"using the fitted map of {fitted_from}: "
                           f"{type(projector).__name__}, checksum "
                           f"{projector.spec_checksum_[:12]}, scaling "
                           f"{describe(getattr(projector, 'preprocessing_', None))} "
                           "(nothing is refitted)", err=True)
        else:
            projector = make_projector(method, **options)
        # the cluster starts only when there is work for it: a mismatched store is
        # refused, and a finished one confirmed, without one
        summary, _, _ = featurize_to_store(
            input_path, output, projector, client=lambda: stack.enter_context(cluster()),
            store=store, scaling=scaling, hooks=hooks, overwrite=overwrite, retries=retries,
            dry_run=dry_run)
    return summary


#: featurize's flag for each generic option of dkrp.methods (random_state is --seed)
OPTION_FLAGS = {
    "degree": "--degree",
    "n_components": "--n-components",
    "n_hyperplanes": "--n-hyperplanes",
    "n_terms": "--n-terms",
    "distribution": "--distribution",
    "density": "--density",
    "pool": "--pool",
    "index_design": "--index-design",
    "form": "--form",
    "kernel": "--kernel",
    "gamma": "--gamma",
    "scale": "--scale",
    "random_state": "--seed",
}


def method_defaults():
    """``{option: text}``: each generic option's default, from the signatures of the classes
    of the methods that take it: the most common value first, then the methods that differ,
    e.g. ``{"n_components": "100; pca: 50", ...}`` (``random_state``/--seed is left out)."""
    import inspect
    from collections import Counter

    from ..methods import METHODS, method_names

    out = {}
    for option in OPTION_FLAGS:
        if option == "random_state":
            continue
        values = {}
        for name in method_names():
            info = METHODS[name]
            param = info.aliases.get(option, option)
            if param in info.options:
                values[name] = inspect.signature(info.load()).parameters[param].default
        if not values:
            continue
        counts = Counter(repr(v) for v in values.values())
        # the most common default leads; on a tie, the default method's (krp)
        lead = max(counts, key=lambda r: (counts[r], repr(values.get("krp")) == r))
        text = [_default_text(next(v for v in values.values() if repr(v) == lead))]
        text += [f"{name}: {_default_text(v)}" for name, v in values.items() if repr(v) != lead]
        out[option] = "; ".join(text)
    return out


def _default_text(value):
    return "none" if value is None else str(value)


def method_flags(name):
    """``(flags, python_only)``: featurize's flags that ``name`` takes, and the class
    parameters it takes that have no flag (set them from Python)."""
    from ..methods import METHODS

    info = METHODS[name]
    generic = {target: option for option, target in info.aliases.items()}
    flags, python_only = [], []
    for param in info.options:
        option = generic.get(param, param)
        if option in OPTION_FLAGS:
            flag = OPTION_FLAGS[option]
            flags.append(flag if option == param else f"{flag} ({param})")
        else:
            python_only.append(param)
    return flags, python_only


@main.command(short_help="List the --method feature maps and their options.")
def methods():
    """List the feature maps that `dkrp featurize --method` takes, with their options.

    Options a method does not take are refused (not silently ignored) by
    featurize. Data-dependent methods make exactly one pass over the input to fit.
    "scaling" says what input each map expects (featurize --standardize and
    --scale-rows unit learn and store it with the map).

    \b
    Example:
      dkrp methods
    """
    from ..methods import METHODS, method_names

    indent = " " * 14

    def echo(text, first=indent):
        click.echo(click.wrap_text(text, width=88, initial_indent=first,
                                   subsequent_indent=indent + "  "))

    for name in method_names():
        info = METHODS[name]
        flags, python_only = method_flags(name)
        echo(info.summary, first=f"{name:<14}")
        if info.data_dependent:
            echo("data-dependent: exactly one pass over the input to fit "
                 f"({info.fit_pass.format_map(_Placeholders())})")
        echo(f"options: {' '.join(flags)}")
        if info.scaling:
            echo(f"scaling: {info.scaling}")
        if python_only:
            echo(f"Python API only: {', '.join(python_only)}")


class _Placeholders(dict):
    """Leaves ``{name}`` for fields of a fit_pass text (``n_landmarks`` -> ``p``)."""

    def __missing__(self, key):
        return {"n_components": "k", "n_landmarks": "p"}.get(key, key)
