"""Hypothesis strategies for inputs of feature maps: shapes, dtypes, dense/CSR, row chunkings.

Property tests of the seed contract draw an input and a way to cut it into row
blocks, then check that the features do not depend on the cut (to float
tolerance) and that the same cut always gives the same bytes. Downstream maps can
reuse these strategies for their own properties.

Requires ``hypothesis`` (``pip install dkrp[test]``).

Examples
--------
>>> from hypothesis import given, settings
>>> @settings(max_examples=5, database=None)
... @given(inputs_and_chunks(max_rows=20))
... def check(case):
...     X, chunks = case
...     assert sum(chunks) == X.shape[0] and all(c > 0 for c in chunks)
>>> check()
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = [
    "float_dtypes",
    "shapes",
    "row_chunkings",
    "dense_arrays",
    "inputs",
    "inputs_and_chunks",
]


def float_dtypes() -> st.SearchStrategy[np.dtype]:
    """The two compute dtypes of dkrp: float32 and float64."""
    return st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)])


def shapes(*, min_rows=1, max_rows=64, min_features=1, max_features=16):
    """``(n_samples, n_features)`` pairs."""
    return st.tuples(st.integers(min_rows, max_rows), st.integers(min_features, max_features))


@st.composite
def row_chunkings(draw, n_rows: int, *, max_chunks: int = 8):
    """Row-chunk sizes: positive integers summing to ``n_rows`` (at most ``max_chunks``)."""
    if n_rows == 0:
        return (0,)
    n_cuts = draw(st.integers(0, min(max_chunks, n_rows) - 1))
    cuts = draw(st.lists(st.integers(1, n_rows - 1), min_size=n_cuts, max_size=n_cuts,
                         unique=True)) if n_rows > 1 else []
    bounds = [0, *sorted(cuts), n_rows]
    return tuple(b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True))


def dense_arrays(shape, dtype=np.float64, *, max_abs=10.0):
    """Finite arrays of ``shape`` with entries in ``[-max_abs, max_abs]`` and some exact zeros."""
    dtype = np.dtype(dtype)
    elements = st.one_of(
        st.just(0.0),
        st.floats(-max_abs, max_abs, allow_nan=False, allow_infinity=False,
                  width=8 * dtype.itemsize),
    )
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def inputs(draw, *, shape=None, dtype=None, sparse=None, max_rows=64, max_features=16):
    """A dense ndarray or a CSR matrix (float32 or float64) with finite entries."""
    shape = shape if shape is not None else draw(shapes(max_rows=max_rows,
                                                        max_features=max_features))
    dtype = dtype if dtype is not None else draw(float_dtypes())
    X = draw(dense_arrays(shape, dtype))
    sparse = sparse if sparse is not None else draw(st.booleans())
    return sp.csr_matrix(X) if sparse else X


@st.composite
def inputs_and_chunks(draw, *, max_rows=64, max_features=16, max_chunks=8, **kwargs):
    """``(X, chunks)``: an input from :func:`inputs` and a row chunking of it."""
    X = draw(inputs(max_rows=max_rows, max_features=max_features, **kwargs))
    return X, draw(row_chunkings(X.shape[0], max_chunks=max_chunks))
