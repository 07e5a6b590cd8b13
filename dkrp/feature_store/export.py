"""Exporting a feature store for other tools: ``.npy``, Parquet or LIBSVM text.

This module owns :func:`export_features` (``dkrp export STORE --to FORMAT OUT``). The
store is read one chunk at a time (memory stays at one chunk), checked as it is
read (a complete store only, every chunk's checksum), and the output is written to a
temporary sibling and renamed into place, so a failed export leaves no half file.

Formats
-------
``npy``
    ``OUT`` holds ``Z`` exactly (same dtype and bytes); the labels, if any, go to
    ``OUT`` with ``.y.npy`` in place of ``.npy`` (e.g. ``train.npy``, ``train.y.npy``).
    The only format of a bit store: ``OUT`` holds its packed uint8 signs
    (``dkrp.unpack_bits(np.load(OUT), n_components)`` decodes them).
``parquet``
    Columns ``z0 .. z{k-1}`` (the store's dtype) and ``y`` when there are labels; one
    row group per store chunk. Needs ``pyarrow`` (``pip install dkrp[parquet]``).
``libsvm``
    ``label index:value ...`` lines with 1-based indices (LIBSVM's convention; read
    them with ``sklearn.datasets.load_svmlight_file(OUT, zero_based=False)``), zeros
    omitted, values printed with 17 significant digits (exact for float64). A store
    without labels gets label 0 on every line.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError, Message, MissingDependencyError, Param
from .format import open_features

__all__ = ["EXPORT_FORMATS", "export_features"]

#: Values of ``to`` (``dkrp export --to``).
from .._choices import EXPORT_FORMATS  # noqa: E402 - one list for the CLI and here


def _blocks(features):
    """``(Z block, y block or None)`` for each row chunk, in order."""
    Z, y = features.Z, features.y
    for i in range(Z.numblocks[0]):
        z = np.asarray(Z.blocks[i].compute())
        yield z, (None if y is None else np.asarray(y.blocks[i].compute()))


def labels_path(out) -> Path:
    """Where ``--to npy`` writes the labels of ``out`` (``x.npy`` -> ``x.y.npy``)."""
    out = Path(out)
    stem = out.name[:-4] if out.name.endswith(".npy") else out.name
    return out.with_name(stem + ".y.npy")


def export_features(path, to, out, *, overwrite=False) -> dict:
    """Write the features (and labels) of the feature store ``path`` to ``out``.

    Parameters
    ----------
    path : str or os.PathLike
        A complete feature store.
    to : {"npy", "parquet", "libsvm"}
        The format (see the module docstring).
    out : str or os.PathLike
        The output file.
    overwrite : bool, default=False
        Replace an existing output file (never a directory).

    Returns
    -------
    dict
        ``path`` (the output), ``labels_path`` (``npy`` with labels only, else None),
        ``format``, ``rows``, ``n_components``, ``has_labels``.

    Raises
    ------
    FileExistsError
        ``out`` exists and ``overwrite`` is False.
    ValueError
        An unknown format.
    FeatureStoreError, ChunkError
        As :func:`open_features` (incomplete store, missing or corrupt chunk).
    """
    if to not in EXPORT_FORMATS:
        raise InvalidInputError(f"Unknown export format {to!r}; choose one of "
                                f"{', '.join(EXPORT_FORMATS)}.")
    out = Path(out).expanduser().absolute()
    features = open_features(path)
    if features.encoding == "bits" and to != "npy":
        raise InvalidInputError(
            Message("{} is a bit store (packed sign bits, not features): it exports to npy "
                    "only ({}: the packed uint8 bytes, decoded by dkrp.unpack_bits).",
                    features.path, Param("to", "npy")))
    has_labels = features.y is not None
    targets = [out] + ([labels_path(out)] if to == "npy" and has_labels else [])
    for target in targets:
        if target.is_dir():
            raise FileExistsError(f"{target} is a directory; export writes a file.")
        if target.exists() and not overwrite:
            raise FileExistsError(Message("{} exists; pass {} to replace it.", target,
                                          Param("overwrite", True)))
    out.parent.mkdir(parents=True, exist_ok=True)
    n, k = (int(s) for s in features.Z.shape)
    tmp = out.with_name(f".{out.name}.export-tmp")
    try:
        if to == "npy":
            _write_npy(features, tmp, tmp.with_name(tmp.name + ".y"))
        elif to == "parquet":
            _write_parquet(features, tmp, k)
        else:
            _write_libsvm(features, tmp)
        if to == "npy" and has_labels:
            os.replace(tmp.with_name(tmp.name + ".y"), labels_path(out))
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        tmp.with_name(tmp.name + ".y").unlink(missing_ok=True)
    return {"path": str(out), "labels_path": str(labels_path(out)) if len(targets) > 1 else None,
            "format": to, "rows": n, "n_components": features.n_components,
            "encoding": features.encoding, "has_labels": has_labels}


def _write_npy(features, tmp, tmp_labels):
    Z = features.Z
    array = labels = None
    try:
        array = np.lib.format.open_memmap(tmp, mode="w+", dtype=Z.dtype, shape=Z.shape)
        if features.y is not None:
            labels = np.lib.format.open_memmap(tmp_labels, mode="w+", dtype=features.y.dtype,
                                               shape=features.y.shape)
        row = 0
        for z, y in _blocks(features):
            array[row:row + len(z)] = z
            if labels is not None:
                labels[row:row + len(z)] = y
            row += len(z)
        array.flush()
        if labels is not None:
            labels.flush()
    finally:
        # unmap both files now, also when a chunk fails: the exception's traceback keeps
        # this frame, and with it the maps of the deleted temporary files, open
        del array, labels


def _write_parquet(features, tmp, k):
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError(
            "Exporting to Parquet needs pyarrow: pip install 'dkrp[parquet]'.") from exc
    names = [f"z{j}" for j in range(k)]
    writer = None
    try:
        for z, y in _blocks(features):
            columns = [pa.array(z[:, j]) for j in range(k)]
            if y is not None:
                columns.append(pa.array(y))
            table = pa.Table.from_arrays(columns, names=names + (["y"] if y is not None else []))
            if writer is None:
                writer = pq.ParquetWriter(str(tmp), table.schema)
            writer.write_table(table)
        if writer is None:  # no rows: an empty file with the columns
            fields = [pa.field(c, pa.from_numpy_dtype(features.Z.dtype)) for c in names]
            if features.y is not None:
                fields.append(pa.field("y", pa.from_numpy_dtype(features.y.dtype)))
            writer = pq.ParquetWriter(str(tmp), pa.schema(fields))
    finally:
        if writer is not None:
            writer.close()


def _write_libsvm(features, tmp):
    # scikit-learn's dump_svmlight_file prints 16 digits, which loses the last bit of some
    # float64 values; 17 significant digits read back exactly
    with open(tmp, "w", encoding="ascii") as f:
        for z, y in _blocks(features):
            labels = np.zeros(len(z), dtype=np.int64) if y is None else y
            label_format = "%d" if labels.dtype.kind in "biu" else "%.17g"
            lines = []
            for label, row in zip(labels.tolist(), z, strict=True):
                (cols,) = np.nonzero(row)
                pairs = " ".join("%d:%.17g" % (j + 1, v)
                                 for j, v in zip(cols.tolist(), row[cols].tolist(), strict=True))
                lines.append((label_format % label) + (" " + pairs if pairs else "") + "\n")
            f.writelines(lines)
