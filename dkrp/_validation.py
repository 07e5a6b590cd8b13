"""Input and parameter checks, and the wording of their error messages.

Messages follow scikit-learn (``Input X contains NaN.``, ``X has 63 features, but
... is expecting 64 features as input.``) and add the offending row, and, in the
distributed path, the partition.
"""

from __future__ import annotations

import contextlib
import numbers

import numpy as np
import scipy.sparse as sp

from ._choices import FLOAT_DTYPE_NAMES
from .errors import InvalidInputError, InvalidTypeError, PartitionInputError

__all__ = [
    "sklearn_checks",
    "check_finite_rows",
    "check_integer",
    "check_real",
    "check_choice",
    "check_float_dtype",
    "options_object",
    "first_nonfinite_row",
    "FLOAT_DTYPES",
    "is_dask_collection",
]

#: The dtypes projectors compute in: float32 input stays float32, the rest is float64.
FLOAT_DTYPES = tuple(np.dtype(name).type for name in FLOAT_DTYPE_NAMES)


@contextlib.contextmanager
def sklearn_checks():
    """Re-raise scikit-learn's input errors as dkrp's, message unchanged.

    scikit-learn's checks (``check_array``, ``validate_data``, ``column_or_1d``, ...)
    raise a plain ``ValueError`` or ``TypeError`` for bad input (NaN/inf, the wrong
    number of dimensions or features, sparse input where dense is needed). Inside a
    dkrp entry point that is the user's mistake: it becomes an
    :class:`~dkrp.errors.InvalidInputError` (or :class:`~dkrp.errors.InvalidTypeError`)
    with the original as its ``__cause__``. Subclasses (scikit-learn's
    ``NotFittedError``, dkrp's own errors) pass through as they are.

    Examples
    --------
    >>> from sklearn.utils import check_array
    >>> with sklearn_checks():
    ...     check_array([[1.0, float("nan")]])
    Traceback (most recent call last):
    ...
    dkrp.errors.InvalidInputError: Input contains NaN.
    """
    try:
        yield
    except (ValueError, TypeError) as exc:
        if type(exc) is ValueError:
            raise InvalidInputError(str(exc)) from exc
        if type(exc) is TypeError:
            raise InvalidTypeError(str(exc)) from exc
        raise


def first_nonfinite_row(X):
    """Return ``(row, kind)`` of the first NaN/inf entry of ``X``, or ``None``.

    ``kind`` is ``"NaN"`` or ``"infinity"``.
    """
    values = X.data if sp.issparse(X) else np.asarray(X)
    if values.dtype.kind not in "fc" or values.size == 0:
        return None
    if np.isfinite(values).all():  # fast path: one pass, no allocation of indices
        return None
    if sp.issparse(X):
        X = X.tocsr()
        bad = ~np.isfinite(X.data)
        pos = int(np.flatnonzero(bad)[0])
        row = int(np.searchsorted(X.indptr, pos, side="right") - 1)
        kind = "NaN" if np.isnan(X.data[pos]) else "infinity"
        return row, kind
    bad_rows = ~np.isfinite(values).all(axis=tuple(range(1, values.ndim)))
    row = int(np.flatnonzero(bad_rows)[0])
    kind = "NaN" if np.isnan(values[row]).any() else "infinity"
    return row, kind


def check_finite_rows(X, *, name="X", row_offset=0, partition=None):
    """Raise a ValueError naming the first row with NaN or infinity.

    With ``partition`` given it is a :class:`dkrp.errors.PartitionInputError`
    (a ``ValueError``) carrying the partition.

    Parameters
    ----------
    X : ndarray or sparse matrix
    name : str
        Name of the input in the message.
    row_offset : int
        Added to the local row to report the global row.
    partition : int or None
        Partition (dask block) index, named in the message when given.
    """
    found = first_nonfinite_row(X)
    if found is None:
        return
    row, kind = found
    where = f"row {row_offset + row}"
    if partition is not None:
        where = f"partition {partition}, local row {row}, global row {row_offset + row}"
    if kind == "NaN":
        msg = f"Input {name} contains NaN (at {where})."
    else:
        msg = (
            f"Input {name} contains infinity or a value too large for "
            f"{np.asarray(X.data if sp.issparse(X) else X).dtype!r} (at {where})."
        )
    if partition is not None:
        raise PartitionInputError(msg, partition=partition)
    raise InvalidInputError(msg)


def check_integer(name, value, *, minimum=None, maximum=None):
    """Check that ``value`` is an integer (not bool) within bounds; return it as int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInputError(
            f"{name} must be an integer, got {value!r} of type {type(value).__name__}."
        )
    value = int(value)
    if minimum is not None and value < minimum:
        raise InvalidInputError(f"{name} must be >= {minimum}, got {value}.")
    if maximum is not None and value > maximum:
        raise InvalidInputError(f"{name} must be <= {maximum}, got {value}.")
    return value


def check_real(name, value, *, minimum=None, maximum=None, include_min=True):
    """Check that ``value`` is a finite real number within bounds; return it as float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite real number, got {value!r}.")
    value = float(value)
    if minimum is not None and (value < minimum or (not include_min and value == minimum)):
        op = ">=" if include_min else ">"
        raise InvalidInputError(f"{name} must be {op} {minimum}, got {value}.")
    if maximum is not None and value > maximum:
        raise InvalidInputError(f"{name} must be <= {maximum}, got {value}.")
    return value


def check_choice(name, value, choices):
    """Check that ``value`` is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise InvalidInputError(f"{name} must be one of {options}; got {value!r}.")
    return value


def check_float_dtype(dtype):
    """Check that ``dtype`` is one projectors compute in (:data:`FLOAT_DTYPES`); return it
    as a ``numpy.dtype``, or None for None (the input's own: float32 stays float32)."""
    if dtype is None:
        return None
    dtype = np.dtype(dtype)
    if dtype not in FLOAT_DTYPES:
        raise InvalidInputError(f"dtype must be float32 or float64, got {dtype}.")
    return dtype


def options_object(cls, value, name, keywords, *, where):
    """``value``, an instance of the dataclass ``cls`` passed as ``name=``, or, when it is
    None, ``cls(**keywords)``: the same options given one by one as keywords of ``where``.

    Raises
    ------
    InvalidTypeError
        ``value`` is not a ``cls``, or keywords were given beside it (which of the two
        should win would be a guess: each option is given one way).
    """
    if value is None:
        return cls(**keywords)
    if not isinstance(value, cls):
        raise InvalidTypeError(f"{where}: {name} must be a {cls.__name__}, got "
                               f"{type(value).__name__}.")
    if keywords:
        given = ", ".join(f"{key}=" for key in keywords)
        first = next(iter(keywords))
        raise InvalidTypeError(
            f"{where}() got {given} beside {name}={cls.__name__}(...): give each option one "
            f"way, in {name} or as a keyword, not both (e.g. {name}=dataclasses.replace("
            f"{name}, {first}=...)).")
    return value


def is_dask_collection(X) -> bool:
    """True for dask arrays (and other dask collections), without importing dask eagerly."""
    if not hasattr(X, "__dask_graph__"):
        return False
    from dask.base import is_dask_collection as _is

    return _is(X)
