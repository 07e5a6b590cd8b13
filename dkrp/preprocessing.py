"""Scaling learnt with a feature map and carried in its spec: ``--standardize``, ``--scale-rows``.

Kernels care about the scale of their input: a polynomial kernel of pixels in
0..255 gives features near 1e5, an RBF width means something only for features of
one unit. This module owns the scaling a projector applies to every row before its
map:

* ``standardize``: ``(x - mean) / scale`` per column, the mean and standard
  deviation learnt on the training input in one pass (columns of zero variance are
  left unscaled, as scikit-learn's ``StandardScaler`` does);
* ``scale_rows="unit"``: each row divided by its Euclidean norm (after
  standardizing; an all-zero row stays zero).

The fitted values live in the projector's ``preprocessing_`` attribute, a JSON-able
dict carried in the spec's fitted values::

    "fitted": {"preprocessing": {"standardize": {"mean": [...], "scale": [...]},
                                 "scale_rows": "unit"}}

so a rebuilt projector (``dkrp.from_spec``, every Dask worker, ``featurize --like``)
scales test rows with the training statistics, byte for byte the same everywhere.
Specs without it (every spec written before this option) rebuild unchanged, with
the same checksum. :func:`fit_scaled` is the Python entry point;
:func:`dkrp.featurize_to_store` takes the two as a :class:`ScalingOptions` (or as
``standardize=`` and ``scale_rows=``).

This module imports nothing of dkrp's: :mod:`dkrp._spec` and :mod:`dkrp.base`
call in here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import numpy as np

from .errors import InvalidInputError, Message, Param

__all__ = ["SCALE_ROWS", "ScalingOptions", "fit_preprocessing", "fit_scaled", "preprocess"]

from ._choices import SCALE_ROWS  # noqa: E402 - one list for the CLI and here


def _is_dask(X) -> bool:
    return hasattr(X, "dask") and hasattr(X, "chunks")


def _is_sparse(X) -> bool:
    import scipy.sparse as sp

    return sp.issparse(X) or sp.issparse(getattr(X, "_meta", None))


def check_options(standardize, scale_rows):
    """Validate the two options; return them normalised (``bool``, ``None``/``"unit"``)."""
    if scale_rows is not None and scale_rows not in SCALE_ROWS:
        raise InvalidInputError(
            f"scale_rows must be None or one of {SCALE_ROWS}, got {scale_rows!r}."
        )
    return bool(standardize), scale_rows


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScalingOptions:
    """The scaling a map fitted by a featurize job learns and carries in its spec.

    ``dkrp featurize``'s ``--standardize`` and ``--scale-rows``, for
    :func:`dkrp.featurize_to_store`. Only a projector fitted by the job takes them: a
    fitted one (``dkrp.from_spec`` of a training store's spec) brings its own scaling,
    and other options than it carries are refused. Values are checked and normalised
    when the object is made (``check_options``).

    Parameters
    ----------
    standardize : bool, default=False
        Scale each column to zero mean and unit variance, the statistics learnt on the
        input in the fit pass and stored in the spec, so that ``dkrp.from_spec`` of the
        store's spec scales other data (a test set) the same way. Refused for sparse
        input, whose centred rows would be dense.
    scale_rows : {None, "unit"}
        Divide each row (after ``standardize``) by its Euclidean norm; carried in the
        spec like ``standardize``.

    Raises
    ------
    InvalidInputError
        ``scale_rows`` is not None or one of :data:`SCALE_ROWS`.

    See Also
    --------
    fit_scaled : fit a projector with this scaling, in memory.

    Examples
    --------
    >>> ScalingOptions(standardize=1, scale_rows="unit")
    ScalingOptions(standardize=True, scale_rows='unit')
    >>> ScalingOptions().asked
    False
    """

    standardize: bool = False
    scale_rows: str | None = None

    def __post_init__(self):
        standardize, scale_rows = check_options(self.standardize, self.scale_rows)
        object.__setattr__(self, "standardize", standardize)
        object.__setattr__(self, "scale_rows", scale_rows)

    @property
    def asked(self) -> bool:
        """Whether any scaling is asked for."""
        return self.standardize or self.scale_rows is not None


def fit_preprocessing(X, *, standardize=False, scale_rows=None) -> dict | None:
    """Learn the scaling of ``X``: one pass for the column statistics, if any.

    Parameters
    ----------
    X : ndarray, scipy CSR matrix or dask array of shape (n_samples, n_features)
    standardize : bool, default=False
        Learn each column's mean and standard deviation (one pass over ``X``: the
        mean and variance are computed together). Refused for sparse input, whose
        centred rows would be dense.
    scale_rows : {None, "unit"}
        Divide each row by its Euclidean norm (nothing to learn).

    Returns
    -------
    dict or None
        The JSON-able ``preprocessing_`` value, or None when neither is asked.
    """
    standardize, scale_rows = check_options(standardize, scale_rows)
    if not standardize and scale_rows is None:
        return None
    prep = {}
    if standardize:
        refusal = sparse_refusal(X, standardize=True)
        if refusal:
            raise InvalidInputError(refusal)
        if _is_dask(X):
            import dask

            Xf = X.astype(np.float64)
            mean, var = dask.compute(Xf.mean(axis=0), Xf.var(axis=0))  # one pass over X
        else:
            Xf = np.asarray(X, dtype=np.float64)
            mean, var = Xf.mean(axis=0), Xf.var(axis=0)
        mean = np.asarray(mean, dtype=np.float64)
        scale = np.sqrt(np.asarray(var, dtype=np.float64))
        # a constant column's variance is zero up to rounding: leave it unscaled
        tiny = scale <= 10 * np.finfo(np.float64).eps * np.maximum(np.abs(mean), 1.0)
        scale[tiny] = 1.0
        prep["standardize"] = {"mean": mean.tolist(), "scale": scale.tolist()}
    if scale_rows is not None:
        prep["scale_rows"] = scale_rows
    return prep


_INGEST_DENSELY = Message("dkrp ingest {}", Param("sparse", False, command="ingest"),
                          python="dkrp.io.ingest(..., sparse=False)")


def sparse_refusal(X, *, standardize=False, prep=None, where="the input") -> str | None:
    """Why a map that standardizes cannot take ``X``, or None when it can.

    Parameters
    ----------
    X : ndarray, scipy sparse matrix or dask array
    standardize : bool, default=False
        The statistics are to be learnt on ``X``.
    prep : dict, optional
        The ``preprocessing_`` of a fitted map, which would be applied to ``X``.
    where : str, default="the input"
        What ``X`` is, for the message (e.g. its path).

    Returns
    -------
    str or None
        The message to refuse ``X`` with: centring makes sparse rows dense.
    """
    if not _is_sparse(X):
        return None
    if standardize:
        return Message("{} centres every column, which would make sparse input dense. Use "
                       "{}, or ingest the data densely ({}).", Param("standardize", True),
                       Param("scale_rows", "unit"), _INGEST_DENSELY)
    if prep and "standardize" in prep:
        return Message(
            "{} is sparse, and the fitted map standardizes its input (it was fitted with {}): "
            "centring every column would make it dense. Ingest {} densely ({}) to apply this "
            "map, or fit the map again without {}, e.g. with {}, which keeps sparse rows "
            "sparse.", where, Param("standardize", True), where, _INGEST_DENSELY,
            Param("standardize", True), Param("scale_rows", "unit"))
    return None


def check_preprocessing(prep, n_features) -> dict:
    """Refuse a malformed ``preprocessing`` value (from a spec); return it."""
    if not isinstance(prep, dict) or set(prep) - {"standardize", "scale_rows"}:
        raise InvalidInputError(f"preprocessing must be a dict with keys standardize and/or "
                                f"scale_rows, got {prep!r:.200}.")
    if "standardize" in prep:
        stats = prep["standardize"]
        if not isinstance(stats, dict):
            raise InvalidInputError("preprocessing.standardize must hold mean and scale.")
        for key in ("mean", "scale"):
            values = stats.get(key)
            if not isinstance(values, list) or len(values) != n_features:
                raise InvalidInputError(f"preprocessing.standardize.{key} must be a list of "
                                        f"{n_features} numbers.")
        if any(not (isinstance(s, (int, float)) and s > 0) for s in stats["scale"]):
            raise InvalidInputError("preprocessing.standardize.scale must be positive numbers.")
    if "scale_rows" in prep:
        check_options(False, prep["scale_rows"])
    return prep


def checksum(base: str, prep) -> str:
    """The spec checksum of a map whose state checksum is ``base``, with ``prep`` first.

    ``base`` unchanged without preprocessing, so older specs keep their checksum.
    """
    if not prep:
        return base
    text = json.dumps(prep, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256((base + "|preprocessing|" + text).encode("utf-8")).hexdigest()


def describe(prep) -> str:
    """``"standardize + unit rows"``-style text (``"none"`` without preprocessing)."""
    if not prep:
        return "none"
    parts = (["standardize"] if "standardize" in prep else []) + (
        [f"{prep['scale_rows']} rows"] if "scale_rows" in prep else [])
    return " + ".join(parts)


def preprocess(X, prep, *, cast=None):
    """Apply ``prep`` to ``X`` (ndarray, CSR or dask array); ``X`` itself without it.

    ``cast(name, values, dtype)`` may supply cached casts of the statistics (the
    projector's), else they are cast here. The dtype of ``X`` is kept (float32
    stays float32).
    """
    import scipy.sparse as sp

    if not prep:
        return X
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    if _is_dask(X):
        # the blocks come back in ``dtype`` (integers as float64): say so, or dask's
        # reductions of the result are computed in the input's integer dtype
        meta = getattr(X, "_meta", None)
        return X.map_blocks(preprocess, prep, dtype=dtype, meta=meta)
    if cast is None:
        def cast(name, values, dt):
            return np.asarray(values, dtype=dt)
    if "standardize" in prep:
        if sp.issparse(X):
            raise InvalidInputError("A standardizing map cannot take sparse input (centring makes "
                                    "it dense); pass the rows densely.")
        stats = prep["standardize"]
        X = (np.asarray(X, dtype=dtype) - cast("mean", stats["mean"], dtype)) / cast(
            "scale", stats["scale"], dtype)
    if prep.get("scale_rows") == "unit":
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=dtype)
            norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
            norms[norms == 0] = 1.0
            X = sp.csr_matrix(sp.diags(1.0 / norms).astype(dtype) @ X)
        else:
            X = np.asarray(X, dtype=dtype)
            norms = np.sqrt(np.einsum("ij,ij->i", X, X))
            norms[norms == 0] = 1.0
            X = X / norms[:, None]
    return X


def fit_scaled(projector, X, *, standardize=False, scale_rows=None):
    """Fit ``projector`` on ``X`` scaled as asked; the scaling goes into its spec.

    The statistics are learnt on ``X`` (one pass for ``standardize``), the map is
    fitted on the scaled rows (a data-dependent map samples scaled landmarks), and
    from then on ``projector.transform`` scales every row before its map, in this
    process, on every worker and after ``dkrp.from_spec``.

    Parameters
    ----------
    projector : BaseProjector
        Not fitted yet (fitted in place).
    X : ndarray, CSR matrix or dask array
        The training input.
    standardize, scale_rows
        As for :func:`fit_preprocessing`.

    Returns
    -------
    projector

    Examples
    --------
    >>> import numpy as np, dkrp
    >>> X = np.random.default_rng(0).uniform(0, 255, (50, 4))
    >>> rff = dkrp.RandomFourierFeatures(n_components=8, random_state=0)
    >>> rff = fit_scaled(rff, X, standardize=True)
    >>> same = dkrp.from_spec(rff.to_spec())
    >>> bool((same.transform(X) == rff.transform(X)).all())
    True
    """
    prep = fit_preprocessing(X, standardize=standardize, scale_rows=scale_rows)
    projector.fit(preprocess(X, prep))
    if prep is not None:
        projector._set_preprocessing(prep)
    return projector
