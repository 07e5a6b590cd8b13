"""Opening a featurizer's input: a dataset store, a ``.npy`` or a Parquet file.

:func:`open_input` gives the rows as a dask array and the provenance a feature store
records; :func:`open_labelled_input` adds a dataset store's labels.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidInputError
from ._common import file_sha256
from .arrays import from_npy
from .dataset_store import open_dataset
from .tabular import from_parquet

__all__ = ["open_input", "open_labelled_input"]


def open_input(path):
    """A dask array and its provenance from a dataset store, ``.npy`` or Parquet file.

    Parameters
    ----------
    path : str or os.PathLike
        A dataset store made by :func:`dkrp.io.ingest` (a directory), a ``.npy``
        file, or a Parquet file (``.parquet``, ``.pq``).

    Returns
    -------
    X : dask.array.Array
    provenance : dict
        For a dataset store its ``path`` and attributes; for a file its ``path`` and
        ``sha256``. Recorded in the feature store's input fingerprint.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        ``path`` is a file of another format (the message says how to ingest it).
    """
    X, provenance, _ = open_labelled_input(path)
    return X, provenance


def open_labelled_input(path):
    """:func:`open_input` plus the labels of a dataset store (None without labels)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Input {path} does not exist.")
    if path.is_dir():
        ds = open_dataset(path)
        return ds.X, {"path": str(ds.path), **ds.attrs}, ds.y
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return from_npy(path), {"path": str(path.absolute()),
                                "sha256": file_sha256(path)}, None
    if suffix in (".parquet", ".pq"):
        return from_parquet(path), {"path": str(path.absolute()),
                                    "sha256": file_sha256(path)}, None
    raise InvalidInputError(
        f"{path} is not a dataset store, .npy or Parquet file. Convert it first: "
        f"dkrp ingest {path} {path.with_suffix('.zarr').name}"
    )
