"""``.npy`` headers read once and under one lock, so that threads never parse them at once.

numpy reads a ``.npy`` header with :func:`ast.literal_eval`. On CPython 3.11 up to 3.11.7
the AST constructor keeps its recursion depth in state shared by all threads, so two
threads parsing at the same moment can fail with ``SystemError: AST constructor recursion
depth mismatch`` (CPython gh-106905; CI's Python 3.11.7 hit it ingesting a ``.npy`` file on
the threaded scheduler). Hence:

* :func:`load` is :func:`numpy.load` under :data:`HEADER_LOCK` (for a ``.npy`` file or
  bytes; an ``.npz`` parses each member's header when it is read, so read those in one
  thread);
* :func:`read_layout` reads a file's header once, and :func:`read_rows` memory-maps rows
  by that layout, so a task reading a block parses nothing.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

__all__ = ["HEADER_LOCK", "NpyLayout", "load", "read_layout", "read_rows"]

#: Held while numpy parses a ``.npy`` header (see the module docstring).
HEADER_LOCK = threading.Lock()


def load(file, **kwargs):
    """:func:`numpy.load` with :data:`HEADER_LOCK` held (``allow_pickle`` stays False)."""
    kwargs.setdefault("allow_pickle", False)
    with HEADER_LOCK:
        return np.load(file, **kwargs)


@dataclass(frozen=True)
class NpyLayout:
    """Where a ``.npy`` file's values lie: after ``offset`` bytes, ``shape`` of ``dtype``."""

    path: str
    offset: int
    dtype: np.dtype
    shape: tuple
    fortran_order: bool
    size: int


def read_layout(path) -> NpyLayout:
    """The layout of the ``.npy`` file at ``path``, its header parsed under the lock.

    Raises
    ------
    ValueError
        The file is not ``.npy`` (numpy's message) or its dtype holds Python objects.
    """
    path = os.fspath(path)
    with open(path, "rb") as fh, HEADER_LOCK:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(fh)
        else:
            shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(fh)
        offset = fh.tell()
    if dtype.hasobject:
        raise ValueError("the array holds Python objects, which would need pickle")
    return NpyLayout(path, offset, dtype, tuple(shape), bool(fortran_order),
                     os.path.getsize(path))


def read_rows(layout: NpyLayout, r0: int, r1: int, dtype=None) -> np.ndarray:
    """Rows ``r0:r1`` of the file ``layout`` describes, as a new in-memory array.

    Raises
    ------
    ValueError
        The file's size changed since ``layout`` was read (it was rewritten meanwhile).
    """
    size = os.path.getsize(layout.path)
    if size != layout.size:
        raise ValueError(f"{layout.path} changed while it was being read: {layout.size} bytes "
                         f"when opened, {size} now. Read it again.")
    order = "F" if layout.fortran_order else "C"
    arr = np.memmap(layout.path, dtype=layout.dtype, mode="r", offset=layout.offset,
                    shape=layout.shape, order=order)
    return np.array(arr[r0:r1], dtype=dtype if dtype is not None else arr.dtype)
