"""The store commands: ``dkrp ingest`` (source file -> Zarr dataset store), ``dkrp info``
(describe a dataset or feature store; ``--spec`` prints a feature store's fitted map),
``dkrp verify`` (check every chunk; ``--repair`` recomputes bad feature chunks) and
``dkrp export`` (a feature store's features and labels as .npy, Parquet or LIBSVM)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import click

from .._choices import EXPORT_FORMATS, FLOAT_DTYPE_NAMES, INPUT_FORMATS
from ._group import as_click_errors, cluster_client, cluster_options, main


@main.command(short_help="Convert LIBSVM, CSV, .npy, Parquet or IDX into a Zarr dataset store.")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(INPUT_FORMATS),
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
@click.option("--zero-based/--one-based", "zero_based", default=None,
              help="LIBSVM feature indices start at 0 / at 1 (default: 1-based unless index 0 "
                   "is on at least half of the rows; index 0 on fewer rows is an error naming "
                   "the line, since it would shift every column).")
@click.option("--dtype", type=click.Choice(FLOAT_DTYPE_NAMES),
              help="Stored dtype (default: a .npy file's float32 stays float32, everything "
                   "else is float64).")
@click.option("--overwrite", is_flag=True, help="Replace an existing dataset store at DEST.")
@click.option("--scheduler", metavar="ADDRESS",
              help="Parse LIBSVM, CSV, .npy and Parquet input on this running Dask scheduler, "
                   "e.g. tcp://10.0.0.5:8786 (default: in this process; SRC and DEST must be "
                   "reachable from the workers at the same paths).")
@click.option("--scheduler-file", type=click.Path(dir_okay=False),
              help="Scheduler file written by `dask scheduler --scheduler-file`.")
def ingest(src, dest, fmt, label_column, labels, drop_columns, n_features, chunk_rows, sparse,
           zero_based, dtype, overwrite, scheduler, scheduler_file):
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

    from .. import io

    t0 = time.perf_counter()
    with as_click_errors(), contextlib.ExitStack() as stack:
        client = None
        if scheduler or scheduler_file:
            client = stack.enter_context(cluster_client(scheduler, scheduler_file, None, None))
        io.ingest(src, dest, fmt=fmt, label_column=label_column, drop_columns=drop_columns,
                  n_features=n_features, chunk_rows=chunk_rows, sparse=sparse, dtype=dtype,
                  zero_based="auto" if zero_based is None else zero_based,
                  overwrite=overwrite, labels=labels,
                  **({"scheduler": client} if client is not None else {}))
        attrs = io.open_dataset(dest).attrs
    seconds = time.perf_counter() - t0
    rows = int(attrs["n_samples"])
    how = attrs["storage"]
    if "zero_based" in attrs:  # LIBSVM: say which index base was read (it may be detected)
        how += f", {0 if attrs['zero_based'] else 1}-based indices"
    click.echo(
        f"ingested {rows} rows x {attrs['n_features']} features ({how}) in "
        f"{seconds:.1f} s ({rows / max(seconds, 1e-9):,.0f} rows/s): {Path(dest).absolute()}"
    )


def _describe_lines(d: dict):
    """The lines ``dkrp info`` prints for a store's ``describe()`` summary."""
    complete = "complete" if d["complete"] else "INCOMPLETE"
    n, k = d["shape"]
    if d["format"] == "features":
        lost = ("" if not d.get("missing") else
                f"; {len(d['missing'])} missing file(s), first {d['missing'][0]}: dkrp verify "
                f"{d['path']} --repair copies it from the input")
        done = (f"chunk_rows {d['chunk_rows']}, {complete} ({d['chunks_done']}/"
                f"{d['n_chunks']} chunks done{lost})")
        compressor = d.get("compressor") or "not recorded"
        if d.get("encoding") == "bits":
            yield f"bit store {d['path']}"
            yield (f"  shape ({n}, {k}): {k} sign bits per row packed in {d['bytes_per_row']} "
                   f"uint8 bytes (numpy.packbits order; Z is ({n}, {d['bytes_per_row']})), "
                   f"computed in {d['compute_dtype']}, {done}")
            yield (f"  unpack: dkrp.unpack_bits(Z, {k}) gives ±1 (set bit +1); "
                   "dkrp.read_features(STORE, unpack=True) reads them as float32")
        else:
            yield f"feature store {d['path']}"
            computed = ("" if d.get("compute_dtype") in (None, d["dtype"]) else
                        f" (computed in {d['compute_dtype']})")
            yield f"  shape ({n}, {k}) {d['dtype']}{computed}, {done}"
        yield f"  compressor {compressor}, {d['bytes_per_row']} bytes per row before it"
        params = json.dumps(d["params"], sort_keys=True)
        yield f"  projector {d['projector']} seed {d['seed']} params {params}"
        yield f"  checksum {d['checksum']}"
        yield (f"  scaling {d.get('preprocessing', 'none')}, labels "
               f"{'yes (y)' if d.get('has_labels') else 'none'}")
        yield f"  input {json.dumps(d['input'], sort_keys=True)}"
        yield f"  manifest {json.dumps(d['manifest'], sort_keys=True)}"
    else:
        yield f"dataset store {d['path']}"
        if d.get("missing"):
            complete = (f"INCOMPLETE ({len(d['missing'])} missing file(s), first "
                        f"{d['missing'][0]}: re-ingest it from its source with --overwrite)")
        yield (f"  shape ({n}, {k}) {d['dtype']} {d['storage']}, chunk_rows {d['chunk_rows']}, "
               f"{complete}")
        yield f"  labels {d['has_labels']} ({d['label_dtype']})"
        yield f"  source {d['source']} ({d['source_format']}, sha256 {d['source_sha256']})"
        yield f"  ingest {json.dumps(d['ingest'], sort_keys=True, default=str)}"


def _info_lines(path: Path):
    from ..stores import describe_store

    with as_click_errors():
        summary = describe_store(path)
    if summary is not None:
        yield from _describe_lines(summary)
        return
    import zarr

    attrs = dict(zarr.open_group(str(path), mode="r").attrs)
    yield f"Zarr group {path} (not made by dkrp)"
    yield f"  attributes {json.dumps(attrs, sort_keys=True, default=str)}"


def _summarise_arrays(attrs):
    """``attrs`` with each base64 array of a spec (``spec.arrays``) replaced by its shape,
    dtype and the SHA-256 of its bytes."""
    spec = attrs.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("arrays"), dict):
        return attrs
    import hashlib

    from .._spec import decode_array

    summary = {}
    for name, text in spec["arrays"].items():
        try:
            a = decode_array(text)
        except Exception:  # noqa: BLE001 - describe what is there, do not fail on it
            summary[name] = {"base64_chars": len(str(text)), "undecodable": True}
            continue
        summary[name] = {"shape": list(a.shape), "dtype": a.dtype.name,
                         "sha256": hashlib.sha256(a.tobytes()).hexdigest(),
                         "base64_chars": len(text)}
    return {**attrs, "spec": {**spec, "arrays": summary,
                              "arrays_summarised": "dkrp info --json --full prints them"}}


@main.command(short_help="Describe a dataset or feature store.")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True,
              help="Print the attributes as JSON; a spec's learnt arrays (Nystroem, KG-RP, "
                   "PCA) as shape, dtype and SHA-256 unless --full.")
@click.option("--full", is_flag=True,
              help="With --json: print the learnt arrays too (base64 .npy, can be MBs).")
@click.option("--spec", "as_spec", is_flag=True,
              help="Print a feature store's fitted map (its projector spec) as JSON, to save "
                   "and apply elsewhere: dkrp featurize TEST OUT --spec SPEC.json.")
def info(store, as_json, full, as_spec):
    """Describe a dataset or feature store: shape, completeness, spec, provenance.

    \b
    Examples:
      dkrp info covtype.zarr
      dkrp info krp.zarr --json
      dkrp info nys.zarr --spec > nys.json
    """
    path = Path(store).absolute()
    if as_spec:
        from .._store import read_attrs

        attrs = read_attrs(path) or {}
        if attrs.get("dkrp_format") != "features" or "spec" not in attrs:
            raise click.ClickException(
                f"{path} is not a dkrp feature store: only feature stores hold a spec "
                f"(this one is {attrs.get('dkrp_format') or 'not made by dkrp'}).")
        click.echo(json.dumps(attrs["spec"], indent=2, sort_keys=True))
        return
    if as_json:
        import zarr

        with as_click_errors():
            attrs = dict(zarr.open_group(str(path), mode="r").attrs)
        if not full:
            attrs = _summarise_arrays(attrs)
        click.echo(json.dumps(attrs, indent=2, sort_keys=True, default=str))
        return
    if full:
        raise click.UsageError("--full goes with --json.")
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
    if report.get("repaired_labels"):
        chunks = ", ".join(str(i) for i in report["repaired_labels"])
        yield (f"  repaired {len(report['repaired_labels'])} label chunk(s) of y ({chunks}): "
               "copied from the input")
    if report["ok"]:
        yield "  OK" + ("" if report["complete"] else " (but incomplete)")


@main.command(short_help="Check every chunk of a store; --repair rewrites bad feature chunks.")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--repair", is_flag=True,
              help="Feature stores: recompute the missing and corrupt chunks from the spec "
                   "and the input, copy bad label chunks from the input, and rewrite them "
                   "(byte-identical to a clean run).")
@click.option("--input", "input_path", type=click.Path(exists=True),
              help="The input to recompute from (default: the path recorded in the store); "
                   "a moved or copied input is accepted when its content is the same.")
@cluster_options
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def verify(store, repair, input_path, scheduler, scheduler_file, n_workers, memory_limit,
           quiet):
    """Check every chunk of the dataset or feature store STORE: present, checksum intact.

    With --repair, a feature store's missing and corrupt chunks are recomputed
    from its spec and its input (checked against the input fingerprint in the
    store) on a Dask cluster and rewritten, and bad chunks of its labels are
    copied from the input; nothing else is written. An input is known by its
    content, not its path: a moved or copied one is given with --input. A dataset
    store cannot be rebuilt from itself: re-ingest it from its source. Exits
    with status 1 when a bad chunk remains.

    \b
    Examples:
      dkrp verify krp.zarr
      dkrp verify krp.zarr --repair
      dkrp verify covtype.zarr
    """
    from ..feature_store import verify_store

    with as_click_errors(), contextlib.ExitStack() as stack:
        report = verify_store(
            store, repair=repair, input=input_path, progress=not quiet,
            client=lambda: stack.enter_context(
                cluster_client(scheduler, scheduler_file, n_workers, memory_limit, quiet)),
        )
    for line in _verify_lines(report):
        click.echo(line)
    if not report["ok"]:
        raise click.ClickException(report["advice"] or "bad chunks found")
    if report["advice"]:
        click.echo(f"  {report['advice']}")


@main.command(name="export", short_help="Write a feature store's features and labels as "
                                        ".npy, Parquet or LIBSVM.")
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--to", "fmt", type=click.Choice(EXPORT_FORMATS), required=True,
              help="npy: OUT holds Z exactly, labels in OUT's .y.npy; parquet: columns "
                   "z0..z{k-1} and y; libsvm: 1-based 'label j:value' lines (exact values).")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUT file.")
def export(store, out, fmt, overwrite):
    """Write the features of the feature store STORE (and its labels) to the file OUT.

    For tools that read no Zarr. The store must be complete; it is read one chunk at
    a time, every chunk checked, and OUT appears only once fully written. From
    Python, dkrp.read_features(STORE) gives the features and labels directly.

    \b
    Examples:
      dkrp export krp.zarr krp.npy --to npy          # krp.npy and krp.y.npy
      dkrp export krp.zarr krp.parquet --to parquet
      dkrp export krp.zarr krp.svm --to libsvm
    """
    from ..feature_store.export import export_features

    with as_click_errors():
        result = export_features(store, fmt, out, overwrite=overwrite)
    labels = (f", labels in {result['labels_path']}" if result["labels_path"] else
              "" if result["has_labels"] else
              " (no labels in the store" + (": label 0 on every line)" if fmt == "libsvm"
                                            else ")"))
    what = ("sign bits packed as uint8" if result.get("encoding") == "bits" else "features")
    click.echo(f"exported {result['rows']} rows x {result['n_components']} {what} "
               f"({fmt}) to {result['path']}{labels}")
