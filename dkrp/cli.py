"""The ``dkrp`` command (also ``dask dkrp`` and ``python -m dkrp``): ingest, featurize,
info, verify, methods, demo.

The only place in dkrp that prints. User errors (missing files, bad parameters,
a store made by another run, NaN in the input) become ``click.ClickException``:
one line saying what is wrong and what to do, no traceback.

With no ``--scheduler``/``--scheduler-file`` (and no ``scheduler-address`` in
``dask.config``) the commands that compute start an embedded ``LocalCluster`` of
worker processes sized to the machine, every socket bound to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from pathlib import Path

import click

from .methods import method_names

__all__ = ["main"]

logger = logging.getLogger(__name__)


def _user_errors():
    from .errors import SpecError
    from .feature_store import FeatureStoreError

    return (ValueError, FileNotFoundError, FileExistsError, SpecError, FeatureStoreError,
            ImportError, NotADirectoryError, PermissionError, MemoryError)


#: Library wording -> command-line wording, applied to every error the CLI prints.
_CLI_WORDING = [
    (re.compile(r"pass overwrite=True \(--overwrite[^)]*\)"), "pass --overwrite"),
    (re.compile(r"pass overwrite=True / --overwrite"), "pass --overwrite"),
    (re.compile(r"overwrite=True \(--overwrite\)"), "--overwrite"),
    (re.compile(r"\(or pass retries=N, --retries N,"), "(or pass --retries N"),
    (re.compile(r"drop_columns=\[?'([^']*)'\]?"), r"--drop-column \1"),
    (re.compile(r"drop_columns="), "--drop-column"),
    (re.compile(r"label_column="), "--label-column "),
    (re.compile(r"\bn_features=(\d+)"), r"--n-features \1"),
    (re.compile(r", or pass allow_incomplete=True to (inspect|open) it( anyway)?"),
     " (dkrp info shows how far it got)"),
]


def _cli_wording(message: str) -> str:
    """Say ``--drop-column`` where the library says ``drop_columns=``, and so on."""
    for pattern, replacement in _CLI_WORDING:
        message = pattern.sub(replacement, message)
    return message


def _error_message(exc: BaseException) -> str:
    """One or two lines: what failed, where, and what to do."""
    if isinstance(exc, _user_errors()):
        text = str(exc) or type(exc).__name__
        if isinstance(exc, (FileNotFoundError, PermissionError)) and exc.filename:
            text = f"{exc.strerror or text}: {exc.filename}" if not str(exc).startswith(
                ("No ", "Input")) else text
        return _cli_wording(text)
    if isinstance(exc, EOFError):
        return ("An input ended early (EOFError: a truncated or corrupt file?). Check the "
                "file against its checksum; rerun with -v for where it happened.")
    return (f"{type(exc).__name__}: {exc}. This is unexpected: rerun with -v for the "
            "traceback and report it.")


class _Group(click.Group):
    """Every error reaching the command line becomes one or two lines; -v adds the traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, KeyboardInterrupt):
            raise
        except click.ClickException as exc:
            if ctx.params.get("verbose") and exc.__cause__ is not None:
                _print_traceback(exc.__cause__)
            raise
        except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
            if ctx.params.get("verbose"):
                _print_traceback(exc)
            raise click.ClickException(_error_message(exc)) from exc


def _print_traceback(exc):
    import traceback

    traceback.print_exception(exc, file=sys.stderr)


@contextlib.contextmanager
def _as_click_errors():
    try:
        yield
    except click.ClickException:
        raise
    except _user_errors() as exc:
        raise click.ClickException(_cli_wording(str(exc))) from exc


def _cluster_options(func):
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
    ]
    for option in reversed(options):
        func = option(func)
    return func


@contextlib.contextmanager
def _client(scheduler, scheduler_file, n_workers, memory_limit):
    import dask

    from .parallel import connect

    if scheduler is None and scheduler_file is None:
        scheduler = dask.config.get("scheduler-address", None)
    if (scheduler or scheduler_file) and (n_workers or memory_limit):
        raise click.UsageError(
            "--n-workers/--memory-limit size the embedded cluster; drop them when using "
            "--scheduler or --scheduler-file."
        )
    try:
        with connect(scheduler=scheduler, scheduler_file=scheduler_file, n_workers=n_workers,
                     memory_limit=memory_limit) as client:
            try:
                yield client
            except KeyboardInterrupt:
                _quiet_cluster(client, embedded=not (scheduler or scheduler_file))
                raise
    except OSError as exc:
        if scheduler or scheduler_file:
            raise click.ClickException(
                f"Could not reach the Dask scheduler {scheduler or scheduler_file}: {exc}. "
                "Check the address and that the scheduler is running."
            ) from exc
        raise


def _quiet_cluster(client, embedded):
    """After Ctrl-C: no log lines from this process or (embedded) workers as they close."""
    from ._worker_signals import quiet_distributed_logs

    quiet_distributed_logs()
    if embedded:  # a shared cluster's logs are its owner's
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
      dkrp featurize covtype.zarr covtype-krp.zarr --n-components 2000 --seed 0
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


@main.command(short_help="Convert LIBSVM, CSV, .npy, Parquet or IDX into a Zarr dataset store.")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["libsvm", "csv", "npy", "parquet", "idx"]),
              help="Input format (default: from the file name).")
@click.option("--label-column", help="CSV/Parquet column stored as labels y.")
@click.option("--labels", "labels", type=click.Path(dir_okay=False),
              help="IDX only: the matching labels file (e.g. train-labels-idx1-ubyte.gz).")
@click.option("--drop-column", "drop_columns", multiple=True,
              help="CSV/Parquet column to leave out (repeatable), e.g. --drop-column Id.")
@click.option("--n-features", type=click.IntRange(min=1), help="Number of features (LIBSVM).")
@click.option("--chunk-rows", type=click.IntRange(min=1),
              help="Rows per chunk (default: about 64 MiB per chunk).")
@click.option("--sparse/--dense", default=None,
              help="Store LIBSVM input as CSR blocks or densely (default: by density).")
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default="float64",
              show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace an existing dataset store at DEST.")
def ingest(src, dest, fmt, label_column, labels, drop_columns, n_features, chunk_rows, sparse,
           dtype, overwrite):
    """Convert SRC (LIBSVM, CSV, .npy, Parquet, IDX) into a Zarr v3 dataset store DEST.

    DEST holds X chunked by rows (about 64 MiB per chunk unless --chunk-rows is
    given), the labels y when there are any, and the source's path, SHA-256 and the
    ingest options. LIBSVM files are parsed in parallel chunks and can stay sparse.

    \b
    Examples:
      dkrp ingest train.csv covtype.zarr --label-column Cover_Type --drop-column Id
      dkrp ingest w8a w8a.zarr --format libsvm --n-features 300 --sparse
      dkrp ingest X.npy x.zarr --chunk-rows 100000 --dtype float32
      dkrp ingest train-images-idx3-ubyte.gz mnist.zarr \\
           --labels train-labels-idx1-ubyte.gz --dtype float32
    """
    import time

    from . import io

    t0 = time.perf_counter()
    with _as_click_errors():
        io.ingest(src, dest, fmt=fmt, label_column=label_column, drop_columns=drop_columns,
                  n_features=n_features, chunk_rows=chunk_rows, sparse=sparse, dtype=dtype,
                  overwrite=overwrite, labels=labels)
        attrs = io.open_dataset(dest).attrs
    seconds = time.perf_counter() - t0
    rows = int(attrs["n_samples"])
    click.echo(
        f"ingested {rows} rows x {attrs['n_features']} features ({attrs['storage']}) in "
        f"{seconds:.1f} s ({rows / max(seconds, 1e-9):,.0f} rows/s): {Path(dest).absolute()}"
    )


def _parse_float_or(name, value, word):
    if value is None or value == word:
        return value
    try:
        return float(value)
    except ValueError:
        raise click.BadParameter(
            f"must be a number or {word!r}, got {value!r}", param_hint=name
        ) from None


@main.command(short_help="Featurize a dataset into a resumable Zarr feature store.")
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
@click.option("--distribution", type=click.Choice(["gaussian", "achlioptas"]),
              help="Distribution of the hyperplane entries (krp, explicit, prp).")
@click.option("--density", help="Achlioptas density 1/s (a number or 'auto').")
@click.option("--pool", type=click.Choice(["iid", "orthogonal", "tight_frame", "structured"]),
              help="How the hyperplane pool is built (krp; rff takes iid, orthogonal, "
                   "structured): iid rows as in the paper (default), orthogonal blocks, a "
                   "tight frame, or structured Hadamard blocks (fast Walsh-Hadamard transform).")
@click.option("--index-design", type=click.Choice(["random", "balanced"]),
              help="How krp components pick pool rows: random subsets (default) or balanced "
                   "(every pool row used equally often).")
@click.option("--kernel",
              help="Kernel for methods that take one: homogeneous_polynomial, polynomial, "
                   "gaussian or laplacian (see `dkrp methods`).")
@click.option("--gamma", help="Kernel width (a number or 'scale').")
@click.option("--scale", type=float,
              help="srf: the polynomial kernel's a >= 2, (1 - ||x - y||^2 / a^2)^degree.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Random seed; the same seed gives the same features on any cluster.")
@click.option("--dtype", type=click.Choice(["float32", "float64"]),
              help="Output dtype (default: float32 for float32 input, else float64).")
@_cluster_options
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
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or progress lines.")
def featurize(input_path, output, method, degree, n_components, n_hyperplanes, n_terms,
              distribution, density, pool, index_design, kernel, gamma, scale, seed, dtype,
              scheduler, scheduler_file, n_workers, memory_limit, retries, overwrite, chunk_rows,
              dry_run, quiet):
    """Featurize IN (dataset store, .npy or Parquet) into the resumable feature store OUT.zarr.

    Only the method's seed and parameters (a JSON spec of a few KB) go to the
    workers; each regenerates the hyperplanes, checks their checksum and writes its
    own chunks. The same seed gives the same features on any cluster. Re-running
    the same command after a crash writes only the missing chunks; on a finished
    store it is a no-op; a store made by another spec or input is refused unless
    --overwrite. Data-dependent methods (nystroem, kg-rp, pca) first make exactly
    one pass over IN to fit. `dkrp methods` lists the methods and their options.

    \b
    Examples:
      dkrp featurize covtype.zarr krp.zarr --degree 2 --n-components 2000 --seed 0
      dkrp featurize mnist.zarr sorf.zarr --pool structured --n-hyperplanes 1024 --n-terms 30
      dkrp featurize x.npy rff.zarr --method rff --gamma scale --dtype float32
      dkrp featurize mnist.zarr nys.zarr --method nystroem --kernel polynomial --degree 3
      dkrp featurize big.zarr out.zarr --scheduler tcp://10.0.0.5:8786 --retries 2
    """
    from .methods import fit_pass_message

    density = _parse_float_or("--density", density, "auto")
    gamma = _parse_float_or("--gamma", gamma, "scale")

    def on_fit(projector, seconds):
        if quiet:
            return
        if seconds is None:
            click.echo(f"fit: {fit_pass_message(method, projector)}...", err=True)
        else:
            click.echo(f"fit: done in {seconds:.1f} s", err=True)

    planned = {}
    try:
        options = dict(degree=degree, n_components=n_components,
                       n_hyperplanes=n_hyperplanes, n_terms=n_terms, distribution=distribution,
                       density=density, pool=pool, index_design=index_design, kernel=kernel,
                       gamma=gamma, scale=scale, random_state=seed)
        summary = _featurize_job(input_path, output, method, options, dtype, scheduler,
                                 scheduler_file, n_workers, memory_limit, retries, overwrite,
                                 quiet, on_fit, planned, chunk_rows, dry_run)
    except KeyboardInterrupt:
        _interrupted(planned)
    if dry_run:
        from .jobs import format_bytes

        (n, k), total = summary["shape"], summary["bytes"]
        click.echo(f"dry run: {summary['path']} would hold {n} x {k} {summary['dtype']} "
                   f"features = {format_bytes(total) if total is not None else '?'} in "
                   f"{summary['n_chunks']} chunks of {summary['chunk_rows']} rows; one task "
                   f"needs about {format_bytes(summary['task_memory'])}. Nothing was written.")
        return
    rows, seconds = summary["rows"], summary["seconds"]
    click.echo(
        f"featurized {rows} rows -> {summary['n_components']} {summary['dtype']} features in "
        f"{seconds:.1f} s ({summary['rows_per_second']:,.0f} rows/s; "
        f"{summary['chunks_written']} chunks written, {summary['chunks_skipped']} already done): "
        f"{summary['path']}"
    )


def _interrupted(planned):
    """Ctrl-C: one line saying how far the run got and how to resume; exit status 130."""
    # the cluster is closed by now; whatever distributed says while it goes is noise here
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    plan = planned.get("plan")
    if plan is None:
        click.echo("Interrupted before any chunk was written.", err=True)
        sys.exit(130)
    from .feature_store.format import _done_chunks

    build, n_chunks = plan["build_path"], plan["attrs"]["n_chunks"]
    try:
        done = int(_done_chunks(build, n_chunks).sum()) if build.exists() else 0
    except Exception:  # noqa: BLE001 - the count is a courtesy; the hint matters
        done = "?"
    where = (f"{build} (the replacement of {plan['path']}, which is unchanged)"
             if plan.get("replace") else str(build))
    click.echo(f"Interrupted: {done} of {n_chunks} chunks done in {where}. Run the same "
               "command again to resume.", err=True)
    sys.exit(130)


def _featurize_job(input_path, output, method, options, dtype, scheduler, scheduler_file,
                   n_workers, memory_limit, retries, overwrite, quiet, on_fit, planned,
                   chunk_rows, dry_run):
    from .jobs import featurize_to_store
    from .methods import make_projector

    with _as_click_errors(), contextlib.ExitStack() as stack:
        projector = make_projector(method, **options)
        # the cluster starts only when there is work for it: a mismatched store is
        # refused, and a finished one confirmed, without one
        summary, _, _ = featurize_to_store(
            input_path, output, projector,
            client=lambda: stack.enter_context(
                _client(scheduler, scheduler_file, n_workers, memory_limit)),
            overwrite=overwrite, dtype=dtype, retries=retries, progress=not quiet,
            on_fit=on_fit, on_plan=lambda plan: planned.update(plan=plan),
            chunk_rows=chunk_rows, dry_run=dry_run,
        )
    return summary


def _dataset_description(path: Path, attrs: dict) -> dict:
    """The summary of a dataset store, shaped like :meth:`FeatureSet.describe`'s.

    The keys a ``Dataset.describe()`` in :mod:`dkrp.io` would return; ``info`` takes
    it from there once the dataset store has one.
    """
    return {
        "format": "dataset",
        "path": str(path),
        "shape": (attrs.get("n_samples"), attrs.get("n_features")),
        "dtype": attrs.get("dtype"),
        "storage": attrs.get("storage"),
        "chunk_rows": attrs.get("chunk_rows"),
        "complete": attrs.get("complete") is True,
        "has_labels": attrs.get("has_labels"),
        "label_dtype": attrs.get("label_dtype"),
        "source": attrs.get("source"),
        "source_format": attrs.get("source_format"),
        "source_sha256": attrs.get("source_sha256"),
        "ingest": attrs.get("ingest"),
    }


def _describe_lines(d: dict):
    """The lines ``dkrp info`` prints for a store's ``describe()`` summary."""
    complete = "complete" if d["complete"] else "INCOMPLETE"
    n, k = d["shape"]
    if d["format"] == "features":
        yield f"feature store {d['path']}"
        yield (f"  shape ({n}, {k}) {d['dtype']}, chunk_rows {d['chunk_rows']}, {complete} "
               f"({d['chunks_done']}/{d['n_chunks']} chunks done)")
        params = json.dumps(d["params"], sort_keys=True)
        yield f"  projector {d['projector']} seed {d['seed']} params {params}"
        yield f"  checksum {d['checksum']}"
        yield f"  input {json.dumps(d['input'], sort_keys=True)}"
        yield f"  manifest {json.dumps(d['manifest'], sort_keys=True)}"
    else:
        yield f"dataset store {d['path']}"
        yield (f"  shape ({n}, {k}) {d['dtype']} {d['storage']}, chunk_rows {d['chunk_rows']}, "
               f"{complete}")
        yield f"  labels {d['has_labels']} ({d['label_dtype']})"
        yield f"  source {d['source']} ({d['source_format']}, sha256 {d['source_sha256']})"
        yield f"  ingest {json.dumps(d['ingest'], sort_keys=True, default=str)}"


def _info_lines(path: Path):
    import zarr

    if not (path / "zarr.json").is_file():
        raise click.ClickException(f"{path} is not a Zarr store (no zarr.json).")
    attrs = dict(zarr.open_group(str(path), mode="r").attrs)
    kind = attrs.get("dkrp_format")
    if kind == "features":
        from .feature_store import open_features

        with _as_click_errors():
            yield from _describe_lines(open_features(path, allow_incomplete=True).describe())
    elif kind == "dataset":
        yield from _describe_lines(_dataset_description(path, attrs))
    else:
        yield f"Zarr group {path} (not made by dkrp)"
        yield f"  attributes {json.dumps(attrs, sort_keys=True, default=str)}"


@main.command(short_help="Describe a dataset or feature store.")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the raw attributes as JSON.")
def info(store, as_json):
    """Describe a dataset or feature store: shape, completeness, spec, provenance.

    \b
    Examples:
      dkrp info covtype.zarr
      dkrp info krp.zarr --json
    """
    path = Path(store).absolute()
    if as_json:
        import zarr

        with _as_click_errors():
            attrs = dict(zarr.open_group(str(path), mode="r").attrs)
        click.echo(json.dumps(attrs, indent=2, sort_keys=True, default=str))
        return
    for line in _info_lines(path):
        click.echo(line)


def _verify_lines(report: dict):
    """The lines ``dkrp verify`` prints for a :func:`~dkrp.feature_store.verify_store` report."""
    kind = "feature store" if report["format"] == "features" else "dataset store"
    sums = ("crc32c checksums" if report["checksums"] else
            "no checksums (written before dkrp added them): only missing and undecodable "
            "chunks can be found, not changed bytes")
    yield (f"{kind} {report['path']}: {report['chunks_checked']} chunks in "
           f"{len(report['arrays'])} array(s) checked, {sums}")
    for p in report["problems"]:
        yield f"  {p['problem'].upper()} {p['file']} (chunk {tuple(p['chunk'])}): {p['detail']}"
    if report["repaired"]:
        chunks = ", ".join(str(i) for i in report["repaired"])
        yield (f"  repaired {len(report['repaired'])} chunk(s) ({chunks}): recomputed from the "
               "spec and the input and rewritten")
    if report["ok"]:
        yield "  OK" + ("" if report["complete"] else " (but incomplete)")


@main.command(short_help="Check every chunk of a store; --repair rewrites bad feature chunks.")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--repair", is_flag=True,
              help="Feature stores: recompute the missing and corrupt chunks from the spec "
                   "and the input and rewrite them (byte-identical to a clean run).")
@click.option("--input", "input_path", type=click.Path(exists=True),
              help="The input to recompute from (default: the path recorded in the store).")
@_cluster_options
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def verify(store, repair, input_path, scheduler, scheduler_file, n_workers, memory_limit,
           quiet):
    """Check every chunk of the dataset or feature store STORE: present, checksum intact.

    With --repair, a feature store's missing and corrupt chunks are recomputed
    from its spec and its input (checked against the input fingerprint in the
    store) on a Dask cluster and rewritten; nothing else is written. A dataset
    store cannot be rebuilt from itself: re-ingest it from its source. Exits
    with status 1 when a bad chunk remains.

    \b
    Examples:
      dkrp verify krp.zarr
      dkrp verify krp.zarr --repair
      dkrp verify covtype.zarr
    """
    from .feature_store import verify_store

    with _as_click_errors(), contextlib.ExitStack() as stack:
        report = verify_store(
            store, repair=repair, input=input_path, progress=not quiet,
            client=lambda: stack.enter_context(
                _client(scheduler, scheduler_file, n_workers, memory_limit)),
        )
    for line in _verify_lines(report):
        click.echo(line)
    if not report["ok"]:
        raise click.ClickException(report["advice"] or "bad chunks found")
    if report["advice"]:
        click.echo(f"  {report['advice']}")


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
    "kernel": "--kernel",
    "gamma": "--gamma",
    "scale": "--scale",
    "random_state": "--seed",
}


def method_flags(name):
    """``(flags, python_only)``: featurize's flags that ``name`` takes, and the class
    parameters it takes that have no flag (set them from Python)."""
    from .methods import METHODS

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

    \b
    Example:
      dkrp methods
    """
    from .methods import METHODS, method_names

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
        if python_only:
            echo(f"Python API only: {', '.join(python_only)}")


class _Placeholders(dict):
    """Leaves ``{name}`` for fields of a fit_pass text (``n_landmarks`` -> ``p``)."""

    def __missing__(self, key):
        return {"n_components": "k", "n_landmarks": "p"}.get(key, key)


@main.command(short_help="Compare KRP, RFF and raw linear SVMs on a dataset, end to end.")
@click.option("--dataset",
              type=click.Choice(["digits", "mnist", "fashion-mnist", "covtype", "w8a"]),
              default="digits", show_default=True,
              help="digits ships with scikit-learn; the others are read from DKRP_DATA_DIR.")
@click.option("--workdir", type=click.Path(file_okay=False),
              help="Keep the Zarr stores here (default: a temporary directory).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--max-train", type=click.IntRange(min=10), help="Subsample the training rows.")
@_cluster_options
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

    from .evaluation import run_demo

    t0 = time.perf_counter()
    with _as_click_errors(), _client(scheduler, scheduler_file, n_workers, memory_limit) as c:
        rows = run_demo(dataset, client=c, workdir=workdir, seed=seed, max_train=max_train,
                        progress=not quiet)
    click.echo(f"dkrp demo on {dataset}: {rows[0]['note']}")
    header = f"{'model':<48} {'features':>8} {'accuracy':>8} {'featurize s':>11} {'train s':>8}"
    click.echo(header)
    click.echo("-" * len(header))
    for row in rows:
        k = "-" if row["n_features"] is None else str(row["n_features"])
        click.echo(
            f"{row['model']:<48} {k:>8} {row['accuracy']:>8.4f} "
            f"{row['featurize_seconds']:>11.2f} {row['train_seconds']:>8.2f}"
        )
    click.echo(f"total {time.perf_counter() - t0:.1f} s")


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
@click.option("--solver", type=click.Choice(["auto", "primal", "dual", "sgd"]), default="auto",
              show_default=True, help="Linear model: LinearSVC primal/dual or SGD hinge.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Ensemble seed; voter seeds derive from it.")
@click.option("--overwrite", is_flag=True, help="Replace a model already in --out.")
@_cluster_options
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def train(train_path, out, method, n_components, gamma, C, voters, strategy, voting, solver,
          seed, overwrite, scheduler, scheduler_file, n_workers, memory_limit, quiet):
    """Train an ensemble of random-feature linear SVMs on the dataset store TRAIN.zarr.

    Labels come from the store. Voter i's feature map and SVM are seeded from
    --seed, so the same command gives the same model on any cluster. Prints a
    table of the voters (rows, solver, iterations, seconds) and writes --out.

    \b
    Examples:
      dkrp train mnist.zarr --out model --method rff --n-components 500 --voters 13
      dkrp train big.zarr --out model --strategy partition --scheduler tcp://10.0.0.5:8786
      dkrp train mnist.zarr --out single --voters 1
    """
    from .ensemble import MANIFEST, RandomFeatureVotingClassifier, summary_lines
    from .io import open_dataset

    gamma = _parse_float_or("--gamma", gamma, "scale")
    with _as_click_errors():
        if (Path(out) / MANIFEST).exists() and not overwrite:
            raise FileExistsError(f"{out} already holds a saved model; pass --overwrite to "
                                  "replace it.")
        ds = open_dataset(train_path)
        if ds.y is None:
            raise ValueError(f"{train_path} has no labels: ingest it with its labels "
                             "(--label-column, or --labels for IDX).")
        model = RandomFeatureVotingClassifier(
            n_voters=voters, method=method, n_components=n_components, gamma=gamma, C=C,
            estimator=solver, voting=voting, strategy=strategy, random_state=seed)
        with _client(scheduler, scheduler_file, n_workers, memory_limit) as client:
            model.fit(ds.X, ds.y, client=client, progress=not quiet)
        path = model.save(out, overwrite=overwrite)
    for line in summary_lines(model):
        click.echo(line)
    click.echo(f"trained {voters} voter(s) on {ds.X.shape[0]} rows in {model.fit_seconds_:.1f} s: "
               f"{Path(path).absolute()}")


@main.command(short_help="Predict a dataset store with a trained ensemble; score it.")
@click.argument("model_dir", metavar="MODEL_DIR", type=click.Path(file_okay=False))
@click.argument("test_path", metavar="TEST.zarr", type=click.Path())
@click.option("--out", "out", type=click.Path(file_okay=False),
              help="Write the predictions to this Zarr store (array y_pred).")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out store.")
@_cluster_options
def predict(model_dir, test_path, out, overwrite, scheduler, scheduler_file, n_workers,
            memory_limit):
    """Predict TEST.zarr with the model in MODEL_DIR (lazy and parallel on the cluster).

    With labels in the store, prints the accuracy and macro-F1 of the ensemble
    and the accuracy of each voter.

    \b
    Examples:
      dkrp predict model mnist-test.zarr
      dkrp predict model big-test.zarr --out pred.zarr --scheduler tcp://10.0.0.5:8786
    """
    from . import load
    from .ensemble import RandomFeatureVotingClassifier, evaluate, summary_lines
    from .io import open_dataset

    with _as_click_errors():
        model = load(model_dir)
        if not isinstance(model, RandomFeatureVotingClassifier):
            raise ValueError(f"{model_dir} holds a {type(model).__name__}, not a trained "
                             "ensemble (dkrp train).")
        ds = open_dataset(test_path)
        if out is not None and Path(out).exists() and not overwrite:
            raise FileExistsError(f"{out} exists; pass --overwrite to replace it.")
        with _client(scheduler, scheduler_file, n_workers, memory_limit) as client:
            result = evaluate(model, ds.X, ds.y, client=client)
        if out is not None:
            _write_predictions(out, result["y_pred"], model_dir, test_path)
    for line in summary_lines(model, result):
        click.echo(line)
    n = len(result["y_pred"])
    if "accuracy" in result:
        click.echo(f"accuracy {result['accuracy']:.4f}  macro-F1 {result['macro_f1']:.4f}  "
                   f"({n} rows, {result['seconds']:.1f} s)")
    else:
        click.echo(f"predicted {n} rows in {result['seconds']:.1f} s (the store has no labels)")
    if out is not None:
        click.echo(f"predictions: {Path(out).absolute()}")


def _write_predictions(out, y_pred, model_dir, test_path):
    import shutil

    import zarr

    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    group = zarr.open_group(str(out), mode="w")
    group.create_array("y_pred", data=y_pred)
    group.attrs.update({"dkrp_format": "predictions", "model": str(Path(model_dir).absolute()),
                        "input": str(Path(test_path).absolute()), "complete": True})


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
