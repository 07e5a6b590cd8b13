r"""Asymmetric classification with the Sign Product Embedding (Delogne & Jacques, §4).

A server trains a linear model on one embedding of its training rows and
classifies new rows that arrive in the other:

* ``train_on="sketch"``: trained on sketches :math:`\phi(x) = B(x)`; new rows arrive
  as packed bits :math:`\psi(x') = \mathrm{sign}(B(x'))` (a sensor sends
  ``ceil(m/8)`` bytes instead of ``4m``);
* ``train_on="bits"``: the server stores only bits of its training rows (32× less
  memory than float32 sketches) and classifies new rows sent as sketches.

The features are scaled so that their inner products are the paper's estimators
(:func:`dkrp.features.sign_product.sketch_features` and
:func:`~dkrp.features.sign_product.bit_features`):

* sketch · sketch :math:`= \frac{1}{4m}\langle B(x), B(y)\rangle \approx \langle x, y\rangle^2`;
* sketch · bits :math:`= \frac{\pi}{4m}\langle B(x), \psi(y)\rangle \approx
  \langle x, y\rangle^2 / \|y\|^2`;
* bits · bits :math:`\approx \arcsin(\rho)^2` (:math:`\rho` the cosine of the angle).

A linear model :math:`f(z) = w^\top z + b` trained on one embedding has
:math:`w = \sum_i \alpha_i z(x_i)` (SVM, logistic regression, ...), so evaluating it on
the other embedding evaluates the kernel machine with the asymmetric kernel,
:math:`\sum_i \alpha_i k(x_i, x') + b`, as in the paper. Two caveats follow from the
estimators, and are why rows should have unit norm (put a
:class:`sklearn.preprocessing.Normalizer` before this classifier in a Pipeline):

* bits forget the norm: with ``train_on="sketch"`` the decision on bits is that
  on :math:`x'/\|x'\|`; it matches the sketch decision only when :math:`\|x'\| = 1`
  or the intercept is 0 (:meth:`AsymmetricSketchClassifier.predict_bits` takes the
  squared norms when the sender transmits them);
* with ``train_on="bits"`` the model is fitted under the kernel :math:`\arcsin(\rho)^2`
  and evaluated under :math:`\rho^2` (times :math:`\|x'\|^2`): close for small
  :math:`|\rho|`, not equal.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.svm import LinearSVC
from sklearn.utils.validation import check_is_fitted, validate_data

from ._validation import check_choice, sklearn_checks
from .errors import InvalidInputError
from .features.sign_product import (
    SignProductEmbedding,
    bit_features,
    n_bytes,
    sketch_features,
)

__all__ = ["AsymmetricSketchClassifier"]

EMBEDDINGS = ("sketch", "bits")


class AsymmetricSketchClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    r"""Train on SPE sketches and classify bits, or train on bits and classify sketches.

    Parameters
    ----------
    embedding : SignProductEmbedding or None, default=None
        The shared map. Used as it is when already fitted on the input's number of
        features (so a server and its sensors share one spec); otherwise a clone is
        fitted. ``None``: ``SignProductEmbedding()`` (100 components, fresh seed).
    estimator : classifier or None, default=None
        A linear model fitted on the training embedding's features (any scikit-learn
        classifier works; the asymmetric kernel reading needs a linear one).
        ``None``: ``LinearSVC()``.
    train_on : {"sketch", "bits"}, default="sketch"
        The embedding of the training rows; ``predict`` uses the other one.

    Attributes
    ----------
    embedding_ : SignProductEmbedding
        The fitted map (share ``embedding_.to_spec()`` with the senders).
    estimator_ : classifier
        The fitted linear model.
    classes_ : ndarray
    n_features_in_ : int

    Notes
    -----
    ``fit(X, y)`` and ``predict(X)`` take raw rows, so the classifier works in a
    Pipeline and in cross-validation (the test rows are embedded as the other
    embedding). Rows arriving already embedded go to :meth:`predict_bits`
    (``train_on="sketch"``) or :meth:`predict_sketches` (``train_on="bits"``).
    See the module docstring for what the asymmetric decision computes.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import Normalizer
    >>> from dkrp import AsymmetricSketchClassifier, SignProductEmbedding
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 5))
    >>> y = (np.abs(X[:, 0]) > np.abs(X[:, 1])).astype(int)  # a quadratic boundary
    >>> clf = make_pipeline(Normalizer(), AsymmetricSketchClassifier(
    ...     embedding=SignProductEmbedding(n_components=512, random_state=0)))
    >>> bool(clf.fit(X, y).score(X, y) > 0.8)
    True
    """

    def __init__(self, *, embedding=None, estimator=None, train_on="sketch"):
        self.embedding = embedding
        self.estimator = estimator
        self.train_on = train_on

    # -- embeddings ------------------------------------------------------------
    def _fit_embedding(self, X):
        emb = self.embedding
        if emb is None:
            emb = SignProductEmbedding()
        if not isinstance(emb, SignProductEmbedding):
            raise InvalidInputError(
                f"embedding must be a SignProductEmbedding, got {type(emb).__name__}."
            )
        fitted = getattr(emb, "spec_checksum_", None) is not None
        if fitted and emb.n_features_in_ == X.shape[1]:
            return emb
        return clone(emb).fit(X)

    def _features(self, X, embedding):
        emb = self.embedding_
        if embedding == "sketch":
            return sketch_features(emb.transform(X))
        return bit_features(emb.transform_bits(X), emb.n_components_)

    @property
    def _test_embedding(self):
        return "bits" if self.train_on == "sketch" else "sketch"

    # -- scikit-learn API ------------------------------------------------------
    def fit(self, X, y):
        """Fit the embedding (unless given fitted) and the linear model on ``train_on``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : object
        """
        check_choice("train_on", self.train_on, EMBEDDINGS)
        with sklearn_checks():
            X, y = validate_data(self, X, y, accept_sparse="csr",
                                 dtype=(np.float64, np.float32))
        self.embedding_ = self._fit_embedding(X)
        est = LinearSVC() if self.estimator is None else clone(self.estimator)
        self.estimator_ = est.fit(self._features(X, self.train_on), y)
        self.classes_ = self.estimator_.classes_
        return self

    def _check_rows(self, X):
        check_is_fitted(self, "estimator_")
        with sklearn_checks():
            return validate_data(self, X, accept_sparse="csr", dtype=(np.float64, np.float32),
                                 reset=False)

    def decision_function(self, X):
        """Decision values of raw rows embedded as the *other* embedding."""
        X = self._check_rows(X)
        return self.estimator_.decision_function(self._features(X, self._test_embedding))

    def predict(self, X):
        """Classify raw rows embedded as the other embedding (bits if trained on sketches)."""
        X = self._check_rows(X)
        return self.estimator_.predict(self._features(X, self._test_embedding))

    def predict_bits(self, bits, sq_norms=None):
        """Classify rows received as packed bits (``train_on="sketch"``).

        Parameters
        ----------
        bits : ndarray of uint8, shape (n_samples, ceil(m / 8))
            ``embedding_.transform_bits(X)`` computed by the sender.
        sq_norms : array-like of shape (n_samples,) or None
            :math:`\\|x\\|^2` of each row when the sender transmits it: the bit
            features are multiplied by it, so the decision is that of the kernel
            :math:`\\langle x_i, x\\rangle^2` rather than of :math:`x/\\|x\\|`.
        """
        check_is_fitted(self, "estimator_")
        if self.train_on != "sketch":
            raise InvalidInputError(
                "predict_bits classifies bits with a model trained on sketches; this one "
                "was trained on bits (train_on='bits'): use predict_sketches."
            )
        Z = self._bit_rows(bits)
        if sq_norms is not None:
            Z *= np.asarray(sq_norms, dtype=np.float64).reshape(-1, 1)
        return self.estimator_.predict(Z)

    def predict_sketches(self, sketches):
        """Classify rows received as sketches ``embedding_.transform(X)`` (``train_on="bits"``)."""
        check_is_fitted(self, "estimator_")
        if self.train_on != "bits":
            raise InvalidInputError(
                "predict_sketches classifies sketches with a model trained on bits; this one "
                "was trained on sketches (train_on='sketch'): use predict_bits."
            )
        B = np.asarray(sketches, dtype=np.float64)
        m = self.embedding_.n_components_
        if B.ndim != 2 or B.shape[1] != m:
            raise InvalidInputError(f"sketches must have shape (n_samples, {m}), got {B.shape}.")
        return self.estimator_.predict(sketch_features(B))

    def _bit_rows(self, bits):
        bits = np.asarray(bits)
        m = self.embedding_.n_components_
        if bits.ndim != 2:
            raise InvalidInputError(
                f"bits must be 2-D (n_samples, {n_bytes(m)}), got {bits.shape}."
            )
        return bit_features(bits, m)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
