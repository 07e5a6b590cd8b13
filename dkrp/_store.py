"""What every dkrp store shares: the protocol of dataset and feature stores.

A dkrp store is a Zarr v3 group whose attributes say what it is:

* ``dkrp_format`` — ``"dataset"`` (written by :func:`dkrp.io.ingest`) or ``"features"``
  (written by :func:`dkrp.feature_store.write_features`);
* ``format_version`` — the layout version (readers accept every version up to
  theirs; stores without the attribute are version 1);
* ``complete`` — false until the last chunk and attribute are written, then true
  (the completion marker, written last);
* a manifest of what wrote it (dkrp, numpy, zarr, dask versions) and its provenance.

This module owns those attribute names and the checks every opener makes before
reading a byte of data (:func:`check_store`); :mod:`dkrp.stores` opens and
describes either kind. Chunk-level checks (present, checksum) live in
:mod:`dkrp._chunks`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import uuid
from pathlib import Path

from .errors import InvalidInputError, Message

__all__ = ["FORMATS", "read_attrs", "check_store", "consolidate", "publish_atomically",
           "write_attrs"]

#: ``dkrp_format`` -> (what it is called in messages, newest version this dkrp reads)
FORMATS = {"dataset": ("dataset store", 1), "features": ("feature store", 2)}

_CONSOLIDATE_LOCK = threading.Lock()


def read_attrs(path) -> dict | None:
    """The group attributes of the Zarr store at ``path``, or None when it is not one."""
    import zarr

    path = Path(path)
    if not (path / "zarr.json").is_file():
        return None
    try:
        return dict(zarr.open_group(str(path), mode="r").attrs)
    except Exception:  # noqa: BLE001 - an unreadable group is "not a store" to every caller
        return None


def check_store(path, fmt: str, *, allow_incomplete=False, error=InvalidInputError,
                missing_hint="", incomplete_hint="") -> dict:
    """Check that ``path`` is a complete dkrp store of kind ``fmt``; return its attributes.

    Parameters
    ----------
    path : pathlib.Path
        Absolute store path.
    fmt : {"dataset", "features"}
    allow_incomplete : bool, default=False
        Accept a store whose ``complete`` marker is not true.
    error : type
        The exception class to raise for a store that is not one or is incomplete.
    missing_hint : str
        What to do, appended to the message for a missing store.
    incomplete_hint : str or callable
        What to do, appended to the message for an incomplete store (a callable gets
        the attributes, e.g. to count the chunks still missing).

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    error
        Not a Zarr group, another kind of store, a newer layout, or incomplete.
    """
    name, newest = FORMATS[fmt]
    if not path.exists():
        raise FileNotFoundError(f"No {name} at {path}: the path does not exist.{missing_hint}")
    attrs = read_attrs(path)
    if attrs is None:
        raise error(f"{path} is not a dkrp {name}: it is not a readable Zarr v3 group "
                    "(no zarr.json, or an unreadable one).")
    if attrs.get("dkrp_format") != fmt:
        raise error(f"{path} is not a dkrp {name}: attribute dkrp_format is "
                    f"{attrs.get('dkrp_format')!r}, expected {fmt!r}.")
    version = attrs.get("format_version", 1)
    if not isinstance(version, int) or version > newest:
        raise error(f"{path} is a {name} of format_version {version!r}, newer than this dkrp "
                    f"reads ({newest}): upgrade dkrp to open it.")
    if attrs.get("complete") is not True and not allow_incomplete:
        hint = incomplete_hint(attrs) if callable(incomplete_hint) else incomplete_hint
        raise error(Message("{} {} is incomplete: {}", name.capitalize(), path, hint))
    return attrs


def consolidate(path) -> None:
    """Copy every array's metadata into the root ``zarr.json`` of the store at ``path``
    (consolidated metadata), so ``xarray.open_zarr`` opens it with one read and no warning.

    Called once the arrays are final and before the completion marker: the marker's later
    write of the root attributes keeps the consolidated metadata.
    """
    import warnings

    import zarr

    # catch_warnings swaps the process-wide filters: two runs finishing at once in one
    # process would otherwise restore each other's and let zarr's warning through
    with _CONSOLIDATE_LOCK, warnings.catch_warnings():
        # "not part of the Zarr format 3 specification": readers that ignore it read the
        # per-array zarr.json files, which stay authoritative
        warnings.filterwarnings("ignore", message="Consolidated metadata",
                                category=UserWarning)
        zarr.consolidate_metadata(str(path))


def write_attrs(group, attrs: dict) -> None:
    """Add ``attrs`` to ``group``'s attributes in one write of its ``zarr.json``.

    ``group.attrs.update(attrs)`` rewrites the file once per key (28 times for a
    feature store: about 28 ms, a measurable part of a small write); a single
    ``update_attributes`` also never leaves a file holding some keys and not others.
    """
    group.update_attributes(dict(attrs))


@contextlib.contextmanager
def publish_atomically(dest: Path, label: str):
    """Give a hidden sibling of ``dest`` to write into; move it to ``dest`` when all went well.

    Parameters
    ----------
    dest : pathlib.Path
        Path of the store to publish. An existing store there is swapped out, then
        deleted: the caller has checked that it is one dkrp wrote (never a user's file).
    label : str
        What writes it, in the sibling's name: ``.<dest name>.<label>-<random>``.

    Yields
    ------
    pathlib.Path
        The sibling, not yet created.

    Notes
    -----
    If the ``with`` body raises (any exception, KeyboardInterrupt included) or the renames
    fail, the sibling is deleted and ``dest`` is left as it was. A killed process may
    leave the sibling behind; its ``complete`` attribute is then false.
    """
    dest = Path(dest)
    tmp = dest.with_name(f".{dest.name}.{label}-{uuid.uuid4().hex[:12]}")
    try:
        yield tmp
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex[:12]}")
            os.rename(dest, old)
            os.rename(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
