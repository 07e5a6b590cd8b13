"""Open or describe any dkrp store, dataset or features, by what it says it is.

Both kinds follow one protocol (:mod:`dkrp._store`: ``dkrp_format``,
``format_version``, the ``complete`` marker written last, a manifest); this module
dispatches on ``dkrp_format`` so that callers such as ``dkrp info`` need not know
which kind they were given.
"""

from __future__ import annotations

from pathlib import Path

from ._store import FORMATS, read_attrs
from .errors import InvalidInputError

__all__ = ["open_store", "describe_store"]


def open_store(path, *, allow_incomplete=False):
    """Open the dataset or feature store at ``path``.

    Returns
    -------
    dkrp.io.Dataset or dkrp.feature_store.FeatureSet

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        ``path`` is not a dkrp store (its ``dkrp_format`` names none of
        :data:`dkrp._store.FORMATS`).
    """
    path = Path(path).expanduser().absolute()
    if not path.exists():
        raise FileNotFoundError(f"No dkrp store at {path}: the path does not exist.")
    fmt = (read_attrs(path) or {}).get("dkrp_format")
    if fmt == "dataset":
        from .io import open_dataset

        return open_dataset(path, allow_incomplete=allow_incomplete)
    if fmt == "features":
        from .feature_store import open_features

        return open_features(path, allow_incomplete=allow_incomplete)
    raise InvalidInputError(
        f"{path} is not a dkrp store (attribute dkrp_format is {fmt!r}; expected one of "
        f"{sorted(FORMATS)}). Make one with dkrp ingest or dkrp featurize."
    )


def describe_store(path) -> dict | None:
    """The ``describe()`` summary of the store at ``path``, complete or not.

    Reads the attributes (and, for feature stores, the done markers) only, so it
    also describes a store with missing or damaged chunks. None for a Zarr group
    that dkrp did not make.
    """
    path = Path(path).expanduser().absolute()
    attrs = read_attrs(path)
    if attrs is None:
        raise InvalidInputError(f"{path} is not a Zarr store (no readable zarr.json).")
    fmt = attrs.get("dkrp_format")
    if fmt == "dataset":
        from .io.dataset_store import describe_dataset

        return describe_dataset(path, attrs)
    if fmt == "features":
        from .feature_store.format import describe_features

        return describe_features(path, attrs)
    return None
