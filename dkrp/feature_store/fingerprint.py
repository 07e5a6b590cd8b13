"""The input fingerprint: what ties a feature store to the input it was made from.

A fingerprint (:func:`input_fingerprint`) records the input's shape, dtype and storage, a
hash of its provenance without its path (what it *is*; the path is kept apart as a hint),
and a hash of its first and last rows. A new store's run may record the rows with its
first tasks (:func:`fingerprint_pending` until then). :mod:`dkrp.feature_store.plan`
compares fingerprints before resuming or repairing a store.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

__all__ = ["edge_rows_sha256", "fingerprint_pending", "input_fingerprint",
           "legacy_source_sha256", "read_edge_rows", "read_edge_rows_sha256"]


def input_fingerprint(X, source=None, *, edge_rows=True) -> dict:
    """What identifies the input of a run, without reading all of it.

    Parameters
    ----------
    X : dask.array.Array
    source : dict, optional
        Provenance of ``X``, e.g. the attributes of the dataset store it was read
        from (``dkrp.io.open_dataset(...).attrs``) plus its ``path``. Recorded as a
        SHA-256 of its canonical JSON without the path (what the input *is*: a
        byte-identical copy elsewhere has the same), and the path apart, as a hint of
        where to find it (``source_path``).
    edge_rows : bool, default True
        Read the first and last rows now. False leaves ``edge_rows_sha256`` None
        (:func:`fingerprint_pending`): a new store's run reads them with its first
        tasks and records them before anything else (:func:`edge_rows_sha256`).

    Returns
    -------
    dict
        ``shape``, ``dtype``, ``storage`` (dense/csr), ``source_sha256`` (of
        ``source`` less its path, or None), ``edge_rows_sha256``: a hash of the first
        and last rows (so a different array of the same shape is caught even without
        provenance), and ``source_path`` when ``source`` has a path. Earlier versions
        of dkrp hashed the path with the rest (:func:`legacy_source_sha256`).
    """
    sparse = is_sparse_meta(X)
    n = int(X.shape[0])
    digest = None
    if not n:
        digest = edge_rows_sha256()
    elif edge_rows:
        digest = read_edge_rows_sha256(X)
    fp = {
        "shape": [int(s) for s in X.shape],
        "dtype": str(X.dtype),
        "storage": "csr" if sparse else "dense",
        "edge_rows_sha256": digest,
        "source_sha256": None,
    }
    if source is not None:
        located = isinstance(source, dict) and "path" in source
        content = {k: v for k, v in source.items() if k != "path"} if located else source
        fp["source_sha256"] = _sha256_json(content)
        if located:
            fp["source_path"] = str(source["path"])
    return fp


def _sha256_json(value) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def legacy_source_sha256(source, path) -> str | None:
    """The ``source_sha256`` that earlier dkrp recorded for ``source`` found at ``path``.

    It hashed the path with the rest of the provenance, so a store it wrote names
    its input by where it was. Hashing this run's provenance with the
    store's recorded ``source_path`` in place of its own gives the old hash exactly
    when the content is the same: the store is then resumed or repaired from the
    input where it is now (a moved or copied one).

    Parameters
    ----------
    source : dict or None
        This run's provenance (:func:`input_fingerprint`'s ``source``).
    path : str or None
        The ``source_path`` the store recorded.

    Returns
    -------
    str or None
        None when ``source`` has no path to replace (its hash never held one).
    """
    if not (isinstance(source, dict) and "path" in source) or path is None:
        return None
    return _sha256_json({**source, "path": path})


def edge_rows_sha256(*rows) -> str:
    """The ``edge_rows_sha256`` of an input fingerprint: SHA-256 of its first and last
    rows (dense or sparse, one row each), as float64 bytes; of nothing for no rows."""
    h = hashlib.sha256()
    for part in rows:
        part = part.toarray() if hasattr(part, "toarray") else np.asarray(part)
        h.update(np.ascontiguousarray(part, dtype=np.float64).tobytes())
    return h.hexdigest()


def read_edge_rows(X) -> tuple:
    """The first and last rows of the dask array ``X`` (at least one row), read now on the
    current scheduler: ``(first, last)``, one row each."""
    import dask

    return tuple(dask.compute(X[:1], X[int(X.shape[0]) - 1:]))


def read_edge_rows_sha256(X) -> str:
    """:func:`edge_rows_sha256` of the dask array ``X`` (at least one row): its first and
    last rows read now, on the current scheduler."""
    return edge_rows_sha256(*read_edge_rows(X))


def fingerprint_pending(attrs) -> bool:
    """Whether a store's attributes say its run was stopped before it recorded the
    first and last rows of its input: nothing ties its chunks to an input."""
    return (attrs.get("complete") is not True and "edge_rows_sha256" in (attrs.get("input") or {})
            and attrs["input"]["edge_rows_sha256"] is None)


def is_sparse_meta(X) -> bool:
    """Whether the dask array ``X`` holds scipy.sparse blocks."""
    import scipy.sparse as sp

    return sp.issparse(getattr(X, "_meta", None))
