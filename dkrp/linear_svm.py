r"""``PrimalLinearSVC``: ``LinearSVC``'s primal problem solved with BLAS on dense features.

scikit-learn's ``LinearSVC(dual=False)`` runs liblinear's trust-region Newton method,
which keeps a dense matrix as one (index, value) node per entry and multiplies without
BLAS: on MNIST's 60,000 training rows mapped to 1,500 standardised KRP features, one fit
took 321 s, against 34 s here in float32 (``benchmarks/bench_linear_svm.py``). Random
features are dense and have many more rows than columns, so this module solves the same
problem with matrix products instead.

For each class ``c`` (one-vs-rest; one problem for two classes), with ``y_i = +1`` on the
class and ``-1`` off it, the weights ``w`` and intercept ``b`` minimise

.. math::

    f(w, b) = \tfrac12 (\lVert w\rVert^2 + b^2)
              + C \sum_i \max(0,\ 1 - y_i (w \cdot x_i + b))^2

which is ``LinearSVC``'s default problem (``loss="squared_hinge"``, ``penalty="l2"``,
``intercept_scaling=1``: the intercept is the weight of a constant feature 1, regularised
like the others). ``f`` is strongly convex (modulus 1), so its minimiser is unique and both
solvers approach the same ``coef_`` and ``intercept_``; ``tests/test_linear_svm.py`` checks
that on real data against ``LinearSVC`` within the bound the stopping rule gives.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._validation import check_choice, check_integer, check_real, sklearn_checks
from .errors import InvalidInputError

__all__ = ["PrimalLinearSVC"]

#: CG stops once its residual is this fraction of the gradient (liblinear's TRON: 0.1)
_CG_RELATIVE = 0.1
#: above this many features the (k+1)^2 Gram's eigendecomposition costs more than it saves
_MAX_PRECONDITIONED_FEATURES = 4096
#: bytes of ``X`` per row block of a CG step's two products (about a core's L2 cache;
#: of 128 KiB to 2 MiB, 1 MiB was fastest at 500 and close at 2,000 features)
_BLOCK_BYTES = 1024 * 1024


class PrimalLinearSVC(ClassifierMixin, BaseEstimator):
    r"""Linear SVM (squared hinge, L2) solved in the primal by Newton's method with BLAS.

    The same model as ``sklearn.svm.LinearSVC(C=C, dual=False)`` with its defaults
    (one-vs-rest, squared hinge loss, L2 penalty, ``intercept_scaling=1``), for dense
    inputs with many more rows than features (random features).

    Parameters
    ----------
    C : float, default=1.0
        Weight of the loss against the penalty; > 0.
    tol : float, default=1e-4
        Stop a class when ``||grad f|| <= tol * max(min(n_pos, n_neg), 1) / n * ||grad f(0)||``:
        liblinear's primal stopping rule, so ``tol`` means what it means in ``LinearSVC``.
    max_iter : int, default=1000
        Newton iterations per class at most (``LinearSVC``'s default); a class stopped by it
        raises a ``ConvergenceWarning``.
    precondition : {"auto", "gram", "none"}, default="auto"
        The conjugate-gradient preconditioner (Notes). ``"auto"``: ``"gram"`` up to 4,096
        features with at least twice as many rows, else ``"none"`` (the Gram matrix's
        eigendecomposition, ~k^3, would cost more than the CG steps it saves).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) for two classes, else (n_classes, n_features)
        In the input's dtype, as ``LinearSVC``.
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : int
        Newton iterations of the slowest class.
    n_cg_iter_ : int
        Conjugate-gradient steps in all (each one pass of two matrix products over ``X``).
    n_features_in_ : int

    See Also
    --------
    sklearn.svm.LinearSVC : the same problem by liblinear; sparse inputs, other losses.

    Notes
    -----
    Semismooth Newton: at ``(w, b)`` with active rows ``A = {i : y_i z_i < 1}``
    (``z = Xw + b``) the gradient is ``(w, b) + 2C [X 1]_A^T (z_A - y_A)`` and the
    generalised Hessian ``I + 2C [X 1]_A^T [X 1]_A``. The Newton step solves the Hessian
    system by conjugate gradients to a residual of 0.1 of the gradient (as liblinear),
    each step one product ``X P`` and one ``X^T U`` for all classes together, in the
    input's dtype (float32 in, float32 products). The preconditioner is
    ``I + 2C (|A|/n) [X 1]^T [X 1]`` — the Hessian if the active rows had the second
    moments of all rows — applied through one eigendecomposition of the Gram matrix
    ``[X 1]^T [X 1]`` made at the first iteration, so any class and scale costs two
    small products (``precondition="gram"``). The step length is
    exact: ``f`` along the step is a convex piecewise quadratic of one variable, minimised
    by safeguarded Newton steps on the already computed ``X d`` (no further pass over
    ``X``). Weights, margins and the line search are kept in float64.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrp.linear_svm import PrimalLinearSVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5)); y = (X[:, 0] + 0.1 * rng.normal(size=200) > 0)
    >>> clf = PrimalLinearSVC(C=1.0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9), clf.coef_.shape
    (True, (1, 5))
    """

    def __init__(self, C=1.0, *, tol=1e-4, max_iter=1000, precondition="auto"):
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.precondition = precondition

    def fit(self, X, y):
        """Fit one weight vector and intercept per class (one for two classes).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), float32 or float64
            Dense features; sparse input is refused (use ``sklearn.svm.LinearSVC``).
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : PrimalLinearSVC
        """
        C = check_real("C", self.C, minimum=0.0, include_min=False)
        tol = check_real("tol", self.tol, minimum=0.0, include_min=False)
        max_iter = check_integer("max_iter", self.max_iter, minimum=1)
        precondition = check_choice("precondition", self.precondition, ("auto", "gram", "none"))
        with sklearn_checks():
            X, y = validate_data(self, X, y, accept_sparse=False,
                                 dtype=(np.float64, np.float32), ensure_min_samples=2)
            check_classification_targets(y)
        self.classes_ = np.unique(y)
        if self.classes_.size < 2:
            raise InvalidInputError(
                "This solver needs samples of at least 2 classes in the data, but the data "
                f"contains only one class: {self.classes_.tolist()[0]!r}."
            )
        if self.classes_.size == 2:
            Y = np.where(y == self.classes_[1], 1.0, -1.0)[:, None]
        else:
            Y = np.where(y[:, None] == self.classes_[None, :], 1.0, -1.0)
        if precondition == "auto":
            n, k = X.shape
            precondition = ("gram" if k <= _MAX_PRECONDITIONED_FEATURES and n >= 2 * (k + 1)
                            else "none")
        W, b, self.n_iter_, self.n_cg_iter_, stalled = _solve(X, Y, C, tol, max_iter,
                                                              precondition == "gram")
        if stalled:
            warnings.warn(
                f"PrimalLinearSVC stopped {stalled} class problem(s) at max_iter={max_iter} "
                "Newton iterations before the tolerance; increase max_iter.",
                ConvergenceWarning, stacklevel=2,
            )
        self.coef_ = np.ascontiguousarray(W.T, dtype=X.dtype)
        self.intercept_ = b.astype(X.dtype)
        return self

    def decision_function(self, X):
        """Signed distances to the hyperplanes: (n_samples,) for two classes, else (n, K)."""
        check_is_fitted(self)
        with sklearn_checks():
            X = validate_data(self, X, accept_sparse=False, dtype=(np.float64, np.float32),
                              reset=False)
        scores = X @ self.coef_.T + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """The class of the largest decision value (the sign's for two classes)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]


def _solve(X, Y, C, tol, max_iter, gram):
    """Newton iterations for every column of ``Y`` (±1 labels) at once.

    Returns ``W`` (n_features, K), ``b`` (K,), Newton iterations, CG steps, and how many
    classes stopped at ``max_iter``.
    """
    n, k = X.shape
    K = Y.shape[1]
    W = np.zeros((k, K))
    b = np.zeros(K)
    Z = np.zeros((n, K))  # margins X W + b, updated along each step (no extra pass)
    precondition = _preconditioner(X) if gram else None

    gW, gb, active = _gradient(X, Y, Z, W, b, C)
    g0 = _norms(gW, gb)
    n_pos = (Y > 0).sum(axis=0)
    threshold = tol * np.maximum(np.minimum(n_pos, n - n_pos), 1) / n * g0
    cg_steps = 0
    for iteration in range(max_iter + 1):
        g_norm = _norms(gW, gb)
        live = g_norm > threshold
        if not live.any() or iteration == max_iter:
            break
        scale = 2.0 * C * active.sum(axis=0) / n
        dW, db, steps = _newton_step(X, active, gW, gb, g_norm, live, C,
                                     None if precondition is None else precondition(scale))
        cg_steps += steps
        U = (X @ dW.astype(X.dtype, copy=False) + db.astype(X.dtype)).astype(np.float64)
        alpha = np.where(live, _exact_step(Y, Z, U, W, b, dW, db, C), 0.0)
        W += alpha * dW
        b += alpha * db
        Z += alpha * U
        gW, gb, active = _gradient(X, Y, Z, W, b, C)
    return W, b, iteration, cg_steps, int(live.sum())


def _norms(gW, gb):
    return np.sqrt((gW ** 2).sum(axis=0) + gb ** 2)


def _gradient(X, Y, Z, W, b, C):
    """Gradient of every class's objective and its active rows (``y z < 1``)."""
    active = (Y * Z) < 1.0
    R = np.where(active, Z - Y, 0.0)
    gW = W + 2.0 * C * (X.T @ R.astype(X.dtype)).astype(np.float64)
    gb = b + 2.0 * C * R.sum(axis=0)
    return gW, gb, active


def _preconditioner(X):
    """``scale -> (R -> (I + scale [X 1]^T [X 1])^{-1} R)``, per class column of ``scale``."""
    n, k = X.shape
    G = np.empty((k + 1, k + 1))
    G[:k, :k] = X.T @ X
    G[:k, k] = G[k, :k] = X.sum(axis=0, dtype=np.float64)
    G[k, k] = n
    lam, V = np.linalg.eigh(G)
    lam = np.maximum(lam, 0.0)  # a rounding-negative eigenvalue of a Gram matrix is 0

    def for_scale(scale):
        inverse = 1.0 / (1.0 + lam[:, None] * scale[None, :])

        def apply(rW, rb):
            Q = V @ ((V.T @ np.vstack([rW, rb[None, :]])) * inverse)
            return Q[:k], Q[k]
        return apply
    return for_scale


def _newton_step(X, active, gW, gb, g_norm, live, C, precondition):
    """Preconditioned CG on ``H d = -g`` for the live classes; returns ``d`` and the steps."""
    mask = active.astype(X.dtype)
    dW = np.zeros_like(gW)
    db = np.zeros_like(gb)
    rW, rb = -gW, -gb
    zW, zb = precondition(rW, rb) if precondition else (rW, rb)
    pW, pb = zW.copy(), zb.copy()
    rz = (rW * zW).sum(axis=0) + rb * zb
    stop = (_CG_RELATIVE * g_norm) ** 2
    going = live.copy()
    steps = 0
    for _ in range(X.shape[1] + 1):
        XtU, Usum = _masked_normal_product(X, mask, pW, pb)
        HW = pW + 2.0 * C * XtU
        Hb = pb + 2.0 * C * Usum
        steps += 1
        curvature = (pW * HW).sum(axis=0) + pb * Hb
        a = np.where(going, rz / np.where(curvature > 0, curvature, 1.0), 0.0)
        dW += a * pW
        db += a * pb
        rW = rW - a * HW
        rb = rb - a * Hb
        going &= (rW ** 2).sum(axis=0) + rb ** 2 > stop
        if not going.any():
            break
        zW, zb = precondition(rW, rb) if precondition else (rW, rb)
        rz_next = (rW * zW).sum(axis=0) + rb * zb
        beta = np.where(going, rz_next / np.where(rz != 0, rz, 1.0), 0.0)
        pW = zW + beta * pW
        pb = zb + beta * pb
        rz = rz_next
    return dW, db, steps


def _masked_normal_product(X, mask, P, p):
    """``([X 1]^T (mask * ([X 1] [P; p])))`` as ``(X^T U, sum of U's rows)``, in float64.

    One pass over ``X`` in row blocks small enough to stay in the core's cache between
    the block's two products: ``X`` is read from memory once per CG step instead of
    twice. The products are memory-bound (``P`` has one column per class), so this is
    what the step costs: 20 against 30 ms on 20,000 x 500 float32 features and 61 against
    109 ms on 20,000 x 2,000, 10 classes, one thread (issue 33's profile).
    """
    n, k = X.shape
    rows = max(64, _BLOCK_BYTES // max(1, k * X.itemsize))
    P = P.astype(X.dtype)
    p = p.astype(X.dtype)
    XtU = np.zeros(P.shape)
    Usum = np.zeros(P.shape[1])
    for start in range(0, n, rows):
        block = X[start:start + rows]
        U = block @ P
        U += p
        U *= mask[start:start + rows]
        XtU += block.T @ U
        Usum += U.sum(axis=0, dtype=np.float64)
    return XtU, Usum


def _exact_step(Y, Z, U, W, b, dW, db, C, max_steps=100):
    """Minimise ``f(w + a d)`` over ``a >= 0`` per class: safeguarded Newton on ``f'(a)``.

    ``f'(a) = w.d + a d.d + 2C sum_{y(z + a u) < 1} (z + a u - y) u`` is increasing and
    piecewise linear; ``f'(0) < 0`` for a descent direction. A Newton step that leaves the
    bracket ``[lo, hi]`` (``f'(lo) <= 0 <= f'(hi)``) is replaced by bisection.
    """
    wd = (W * dW).sum(axis=0) + b * db
    dd = (dW ** 2).sum(axis=0) + db ** 2
    # at a, row i is on when y(z + a u) < 1 and adds (z - y) u + a u^2 to the slope
    YZ, YU = Y * Z, Y * U
    ZU, UU = (Z - Y) * U, U * U

    def slope(a):
        on = YU * a
        on += YZ
        on = on < 1.0
        UU_on = (UU * on).sum(axis=0)
        first = wd + a * dd + 2.0 * C * ((ZU * on).sum(axis=0) + a * UU_on)
        second = dd + 2.0 * C * UU_on
        return first, second

    K = Y.shape[1]
    lo = np.zeros(K)
    hi = np.ones(K)
    for _ in range(60):  # grow hi until f'(hi) >= 0 (f grows quadratically: few doublings)
        up, _ = slope(hi)
        short = up < 0
        if not short.any():
            break
        lo = np.where(short, hi, lo)
        hi = np.where(short, 2.0 * hi, hi)
    a = np.clip(np.ones(K), lo, hi)
    for _ in range(max_steps):
        first, second = slope(a)
        lo = np.where(first <= 0, a, lo)
        hi = np.where(first >= 0, a, hi)
        newton = a - first / np.where(second > 0, second, 1.0)
        inside = (newton > lo) & (newton < hi)
        nxt = np.where(inside, newton, 0.5 * (lo + hi))
        if np.all(np.abs(nxt - a) <= 1e-12 * np.maximum(1.0, np.abs(a))) or np.all(first == 0):
            a = nxt
            break
        a = nxt
    return a

