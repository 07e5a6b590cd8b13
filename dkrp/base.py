"""Plumbing shared by every projector: validation, dtype rules, dask dispatch and specs.

A projector is a scikit-learn transformer whose fitted state is either

* regenerated from an integer seed (data-independent maps: KRP, RFF, ...), so the
  JSON spec of a few hundred bytes *is* the model; or
* a few small arrays learnt from data (data-dependent baselines: Nyström, KG-RP),
  carried inside the spec (base64 ``.npy``) or saved beside it as ``.npz``.

Either way ``to_spec()`` describes the fitted projector completely, ``from_spec``
rebuilds it bit for bit in any process, and a checksum of the state arrays guards
against a worker that would regenerate other hyperplanes (another numpy, say).

A new map implements only its mathematics:

* ``__init__`` with keyword-only parameters, stored unchanged (scikit-learn's rule);
* ``_resolve_params(n_features)``: check the parameters and set what follows from
  them and the input width (e.g. a resolved density);
* ``_fit_state(X, n_features)``: draw the state from ``self.seed_`` (``X`` is the
  training input — ndarray, CSR or dask array — on ``fit``, and None on
  ``fit_n_features`` and on rebuild from a spec); a seeded map's ``n_components_`` is
  its ``n_components``, set before this is called (a data-dependent map sets its own);
* ``_state_arrays()``: the arrays whose checksum identifies the map (declared once
  as :attr:`~BaseProjector.learnt_arrays` for data-dependent maps);
* ``_transform_array(X)``: map a validated float32/float64 block (ndarray or CSR);
  a map with another output besides its features (SignProductEmbedding's packed sign
  bits) names it in :attr:`~BaseProjector.outputs` and computes it in
  ``_output_array(X, output)``.

A map of dkrp itself is also listed in :data:`dkrp._names.PROJECTORS`, the table that
``dkrp.__all__``, the ``--method`` table and the tests derive from.

Everything else — validation, seeds, dtype rules, the dask path (fit and
transform), specs, save/load, checksums and cached casts of the state — lives
here, in :mod:`dkrp._spec` and in :mod:`dkrp._blockwise`. Fitted scalars a spec
must carry (``gamma_`` when it was computed from data) are declared in
:attr:`~BaseProjector.fitted_values`.
"""

from __future__ import annotations

import json
import logging

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from . import preprocessing
from ._blockwise import featurize, fit_dask
from ._random import resolve_seed
from ._spec import (
    SpecError,
    from_spec,
    load,
    register,
    registered_projectors,
    state_checksum,
)
from ._spec import save as save_spec
from ._spec import to_spec as spec_of
from ._validation import (
    FLOAT_DTYPES,
    check_finite_rows,
    check_integer,
    is_dask_collection,
    sklearn_checks,
)
from .errors import InvalidInputError

logger = logging.getLogger(__name__)

__all__ = ["BaseProjector", "SpecError", "from_spec", "load", "registered_projectors"]


class BaseProjector(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base class of dkrp's feature maps.

    Notes
    -----
    ``fit`` validates ``X``, resolves the seed (``seed_``), draws or learns the state
    and records ``n_features_in_``, ``spec_checksum_`` and ``n_components_``.
    ``transform`` accepts dense arrays, scipy CSR matrices (never densified) and
    dask arrays (featurized lazily by :func:`dkrp.parallel.featurize`). Float32
    input gives float32 output; everything else is computed in float64.
    """

    #: True for maps that need training rows (Nyström, KG-RP); False for maps
    #: defined by a seed and the number of input features alone.
    data_dependent = False

    #: Data-dependent maps: name -> dtype of each learnt array, stored as attribute
    #: ``name + "_"``, carried by the spec and checksummed (in this order).
    learnt_arrays: dict = {}

    #: Names of JSON-able fitted attributes the spec carries besides the seed
    #: (e.g. ``"gamma_"`` when ``gamma="scale"`` was computed from data). A fit
    #: clears them first; a rebuild sets them before ``_fit_state``.
    fitted_values: tuple = ()

    #: Fitted values that specs written before the value existed imply (a rebuild
    #: sets them when the spec's ``fitted`` lacks them): how a new behaviour is
    #: versioned without changing what an old spec produces (e.g. ``cosine_``).
    legacy_fitted_values: dict = {}

    #: What a map computes from a block: its features (``transform``) and, for some
    #: maps, other outputs (SignProductEmbedding: ``"bits"``, ``transform_bits``). Every
    #: output goes through one block path (:meth:`output_block`), in memory and on dask.
    outputs: tuple = ("features",)

    def __init_subclass__(cls, **kwargs):
        """Register a public subclass for :func:`from_spec`; a name taken by another class
        (one of dkrp's maps, say) raises TypeError (see :func:`dkrp._spec.register`)."""
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_") and not cls.__name__.startswith("Base"):
            register(cls)

    # -- hooks for subclasses -------------------------------------------------
    def _resolve_params(self, n_features):  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit_state(self, X, n_features):  # pragma: no cover - abstract
        """Draw (or learn from ``X``, which is None for data-independent maps) the state."""
        raise NotImplementedError

    def _draw_state(self, X, n_features):
        """``_fit_state``, a seeded map's ``n_components_`` set first (on fit and rebuild)."""
        if not self.data_dependent:
            self.n_components_ = self.n_components
        self._fit_state(X, n_features)

    def _state_arrays(self) -> dict:
        """Arrays (float64 master copies) whose checksum identifies the fitted map.

        Data-dependent maps get this from :attr:`learnt_arrays`; data-independent
        maps override it with their regenerated hyperplanes.
        """
        if not self.learnt_arrays:  # pragma: no cover - abstract for seeded maps
            raise NotImplementedError
        return {name: getattr(self, name + "_") for name in self.learnt_arrays}

    def _set_state_arrays(self, arrays: dict):
        """Set the learnt arrays (from a fit or a spec), cast to their declared dtypes."""
        for name, dtype in self.learnt_arrays.items():
            setattr(self, name + "_", np.asarray(arrays[name], dtype=dtype))
        self._after_state_arrays()

    def _after_state_arrays(self):
        """Derive attributes such as ``n_components_`` once the learnt arrays are set."""

    def _transform_array(self, X):  # pragma: no cover - abstract
        """Map a validated, finite block (ndarray or CSR) of dtype float32/float64."""
        raise NotImplementedError

    def _output_array(self, X, output):
        """``output`` (one of :attr:`outputs`) of a validated, scaled, non-empty block."""
        if output == "features":
            return self._transform_array(X)
        raise NotImplementedError(output)  # pragma: no cover - a map that names it computes it

    def output_spec(self, output: str = "features", dtype=np.float64) -> tuple:
        """``(width, dtype)`` of ``output`` for a block computed in ``dtype``.

        Features are ``n_components_`` wide in the compute dtype; other outputs say
        their own (packed bits: uint8, ``ceil(n_components_ / 8)`` bytes).
        """
        self._check_output(output)
        return int(self._n_features_out), np.dtype(dtype)

    def _check_output(self, output):
        if output not in self.outputs:
            raise InvalidInputError(
                f"{type(self).__name__} computes {' and '.join(map(repr, self.outputs))}, "
                f"not {output!r}.")

    @property
    def _n_features_out(self):
        """Output width (scikit-learn's ``get_feature_names_out`` reads it)."""
        return self.n_components_

    def _fitted_extras(self) -> dict:
        """The :attr:`fitted_values` as a JSON-able dict, for the spec."""
        return {name: getattr(self, name) for name in self.fitted_values}

    def _fitted_values_from_params(self) -> dict:
        """The :attr:`fitted_values` that follow from the parameters alone.

        A rebuild refuses a spec whose recorded fitted values disagree with these
        (e.g. ``params.gamma`` edited while ``fitted.gamma_`` still holds the old
        width). Values learnt from data (``gamma="scale"``) are absent.
        """
        return {}

    def _set_fitted_extras(self, extras: dict):
        for key, value in extras.items():
            setattr(self, key, value)

    # -- scikit-learn API -----------------------------------------------------
    def fit(self, X, y=None):
        """Fit the projector.

        For data-independent maps only ``X.shape[1]`` is used (and ``X`` is checked
        for NaN/inf like any input); data-dependent maps sample from ``X``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : object
        """
        if is_dask_collection(X):
            return fit_dask(self, X)
        X = self._validate_input(X, reset=True)
        return self._fit_validated(X, X.shape[1])

    def _validate_input(self, X, *, reset):
        """scikit-learn's checks (2-D, numeric, feature count) plus NaN/inf naming the row."""
        with sklearn_checks():
            X = validate_data(
                self, X, accept_sparse="csr", dtype=FLOAT_DTYPES, ensure_all_finite=False,
                reset=reset,
            )
        check_finite_rows(X)
        return X

    def fit_n_features(self, n_features):
        """Fit a data-independent projector from the number of input features alone.

        Parameters
        ----------
        n_features : int

        Returns
        -------
        self : object
        """
        if self.data_dependent:
            raise InvalidInputError(
                f"{type(self).__name__} learns from training rows; call fit(X) instead "
                "of fit_n_features."
            )
        n_features = check_integer("n_features", n_features, minimum=1)
        self.n_features_in_ = n_features
        return self._fit_validated(None, n_features)

    def _fit_validated(self, X, n_features):
        for name in self.fitted_values:  # a value from an earlier fit must not win
            self.__dict__.pop(name, None)
        self.__dict__.pop("preprocessing_", None)  # so must an earlier fit's scaling
        self._cache = {}
        self._resolve_params(n_features)
        self.seed_ = resolve_seed(self.random_state)
        self._draw_state(X, n_features)
        self.spec_checksum_ = state_checksum(self)
        return self

    def transform(self, X):
        """Map ``X`` to the random feature space.

        Parameters
        ----------
        X : array-like, sparse matrix or dask array of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray or dask array of shape (n_samples, n_components)
            Same dtype as ``X`` when ``X`` is float32, else float64.
        """
        return self._transform_output(X, "features")

    def transform_block(self, X):
        """Map an already validated block (no copy, no checks beyond shape).

        Used by the distributed path, which validates per partition and names the
        partition in its errors.
        """
        return self.output_block(X, "features")

    def output_block(self, X, output="features"):
        """``output`` of an already validated block: the one block path of every output.

        It owns what each output needs alike: an empty block, CSR in any sparse format,
        and the fitted scaling (``preprocessing_``) before the map.
        """
        self._check_output(output)
        if X.shape[0] == 0:
            compute = X.dtype if X.dtype in FLOAT_DTYPES else np.float64
            width, dtype = self.output_spec(output, compute)
            return np.empty((0, width), dtype=dtype)
        if sp.issparse(X) and X.format != "csr":
            X = X.tocsr()
        prep = getattr(self, "preprocessing_", None)
        if prep:
            X = preprocessing.preprocess(X, prep, cast=self._cast_preprocessing)
        return self._output_array(X, output)

    def _transform_output(self, X, output):
        """``output`` of ``X``: numpy, scipy sparse or a dask array (lazily, by spec)."""
        check_is_fitted(self, "spec_checksum_")
        self._check_output(output)
        if is_dask_collection(X):
            return featurize(X, self, output=output)
        return self.output_block(self._validate_input(X, reset=False), output)

    def _set_preprocessing(self, prep):
        """Scale every row with ``prep`` before the map (see :mod:`dkrp.preprocessing`).

        Set by :func:`dkrp.preprocessing.fit_scaled` after a fit, and by a rebuild from a
        spec that carries it; the spec checksum covers it.
        """
        check_is_fitted(self, "spec_checksum_")
        self.preprocessing_ = preprocessing.check_preprocessing(prep, self.n_features_in_)
        self._cache = {k: v for k, v in self.__dict__.get("_cache", {}).items()
                       if not k[0].startswith("preprocessing.")}
        self.spec_checksum_ = state_checksum(self)

    def _cast_preprocessing(self, name, values, dtype):
        return self._cast("preprocessing." + name, values, dtype)

    def _cached(self, name, dtype, build):
        """``build(dtype)``, computed once per fitted state and dtype.

        Transforms derive matrices from the state (a cast, a scaled transpose, ...)
        on every block; this keeps one copy per dtype. The cache is cleared by every
        fit and never pickled.
        """
        key = (name, np.dtype(dtype).str)
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            cache[key] = build(np.dtype(dtype))
        return cache[key]

    def _cast(self, name, array, dtype):
        """Cached contiguous copy of a state array in ``dtype`` (float32 input stays float32)."""
        return self._cached(name, dtype, lambda dt: np.ascontiguousarray(array, dtype=dt))

    def __getstate__(self):
        # Dask's task transport may pickle a projector; drop derived caches.
        state = self.__dict__.copy()
        state.pop("_cache", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._cache = {}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.requires_fit = True
        tags.non_deterministic = False
        return tags

    def __dask_tokenize__(self):
        fitted = getattr(self, "spec_checksum_", None)
        params = json.dumps(self.get_params(deep=False), sort_keys=True, default=repr)
        extras = json.dumps({k: getattr(self, k, None) for k in self.fitted_values},
                            sort_keys=True, default=repr)
        return (type(self).__name__, params, fitted, extras)

    # -- specs ------------------------------------------------------------------
    def to_spec(self) -> dict:
        """A JSON-serialisable description of the fitted projector.

        Returns
        -------
        spec : dict
            Keys: ``format``, ``format_version``, ``class``, ``params``,
            ``n_features_in``, ``seed``, ``fitted``, ``arrays`` (data-dependent
            maps only, base64 ``.npy``), ``checksum`` and ``versions``.
        """
        check_is_fitted(self, "spec_checksum_")
        return spec_of(self)

    def save(self, path):
        """Save as JSON (``path``) plus ``.npz`` of learnt arrays where there are any.

        No pickle is involved: :func:`dkrp.load` reads JSON and ``np.load(...,
        allow_pickle=False)``.

        Raises
        ------
        FileExistsError
            When the ``.npz`` beside ``path`` (same name, suffix ``.npz``) exists and is
            not the arrays file of a spec saved at ``path``: a file dkrp did not write
            is never replaced.
        """
        return save_spec(self, path)
