"""Dataset stores: ingest LIBSVM, CSV, NumPy, Parquet and IDX files into Zarr v3, open them lazily.

This package owns dkrp's on-disk *dataset* format, its provenance record and its completion
marker, plus small readers that expose ``.npy`` and Parquet files as row-chunked dask arrays.
Everything downstream (featurizers, pipelines, the CLI) reads data through :func:`open_dataset`.

Modules
-------
:mod:`~dkrp.io.ingestion`
    :func:`ingest`: format choice, the table of ingesters, atomic publishing.
:mod:`~dkrp.io.dataset_store`
    The store layout, the CSR block codec, :class:`Dataset` and :func:`open_dataset`.
:mod:`~dkrp.io.libsvm`
    LIBSVM/svmlight text, parsed in parallel.
:mod:`~dkrp.io.tabular`
    CSV and Parquet; :func:`from_parquet`.
:mod:`~dkrp.io.arrays`
    ``.npy`` and IDX; :func:`from_npy`, :func:`read_idx`, :func:`read_array`.
"""

# read_idx and the three constants were public names of dkrp.io outside __all__; they stay so
from ._common import file_sha256
from .arrays import from_npy, read_array, read_idx  # noqa: F401
from .dataset_store import (  # noqa: F401
    DATASET_FORMAT,
    FORMAT_VERSION,
    TARGET_CHUNK_BYTES,
    Dataset,
    open_dataset,
    verify_dataset,
)
from .ingestion import ingest
from .tabular import from_parquet

__all__ = [
    "Dataset",
    "file_sha256",
    "from_npy",
    "from_parquet",
    "ingest",
    "open_dataset",
    "read_array",
    "verify_dataset",
]
