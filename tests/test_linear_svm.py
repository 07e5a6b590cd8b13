"""PrimalLinearSVC: the minimiser of LinearSVC's problem, found with BLAS.

The objective is strongly convex with modulus 1 (its ½‖(w, b)‖² term), so for any point
``x`` the distance to the minimiser is at most ``‖∇f(x)‖`` and the excess objective at
most ``‖∇f(x)‖² / 2``. Both bounds are evaluated here, in float64, by an implementation of
the objective written out independently of the module, and compared with liblinear's
solution of the same problem (``LinearSVC(dual=False)``).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from dkrp.errors import InvalidInputError
from dkrp.linear_svm import _BLOCK_BYTES, PrimalLinearSVC


def _objective_and_gradient(X, y_pm, w, b, C):
    """LinearSVC's primal objective for one class (±1 labels) and its gradient, float64."""
    X = np.asarray(X, dtype=np.float64)
    z = X @ w + b
    slack = np.maximum(0.0, 1.0 - y_pm * z)
    f = 0.5 * (w @ w + b * b) + C * (slack ** 2).sum()
    r = -2.0 * C * y_pm * slack  # d/dz of C * slack^2
    return f, np.concatenate([w + X.T @ r, [b + r.sum()]])


def _per_class(model, y):
    """(±1 labels, coef, intercept) for every problem the model solved."""
    classes = model.classes_
    if len(classes) == 2:
        return [(np.where(y == classes[1], 1.0, -1.0), model.coef_[0], model.intercept_[0])]
    return [(np.where(y == c, 1.0, -1.0), model.coef_[i], model.intercept_[i])
            for i, c in enumerate(classes)]


@pytest.fixture(scope="module")
def digits():
    """The 1,797 8×8 digits shipped with scikit-learn, standardised."""
    X, y = load_digits(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.mark.parametrize("binary", [False, True], ids=["ten-classes", "even-vs-odd"])
def test_reaches_liblinears_minimiser_within_the_strong_convexity_bound(digits, binary):
    X, y = digits
    if binary:
        y = np.where(y % 2 == 0, "even", "odd")
    C = 0.1
    ours = PrimalLinearSVC(C=C).fit(X, y)
    theirs = LinearSVC(C=C, dual=False, tol=1e-8, max_iter=10000).fit(X, y)
    assert ours.coef_.shape == theirs.coef_.shape
    for (y_pm, w, b), (_, w_l, b_l) in zip(_per_class(ours, y), _per_class(theirs, y),
                                           strict=True):
        f, g = _objective_and_gradient(X, y_pm, w, b, C)
        f_l, g_l = _objective_and_gradient(X, y_pm, w_l, b_l, C)
        gap = np.linalg.norm(g) + np.linalg.norm(g_l)
        assert np.linalg.norm(np.append(w - w_l, b - b_l)) <= gap
        assert f - f_l <= 0.5 * np.linalg.norm(g) ** 2 + 1e-12 * f
        assert f_l - f <= 0.5 * np.linalg.norm(g_l) ** 2 + 1e-12 * f
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_stops_by_liblinears_rule(digits):
    """Every class ends with ‖∇f‖ <= tol · max(min(n+, n-), 1) / n · ‖∇f(0)‖."""
    X, y = digits
    C, tol = 0.1, 1e-4
    model = PrimalLinearSVC(C=C, tol=tol).fit(X, y)
    n = len(y)
    for y_pm, w, b in _per_class(model, y):
        _, g = _objective_and_gradient(X, y_pm, w, b, C)
        _, g0 = _objective_and_gradient(X, y_pm, np.zeros_like(w), 0.0, C)
        n_pos = int((y_pm > 0).sum())
        assert np.linalg.norm(g) <= tol * max(min(n_pos, n - n_pos), 1) / n * np.linalg.norm(g0)
    assert 1 <= model.n_iter_ < 1000 and model.n_cg_iter_ >= model.n_iter_


def test_float32_products_reach_the_float64_minimiser(digits):
    X, y = digits
    C = 0.1
    m64 = PrimalLinearSVC(C=C).fit(X, y)
    m32 = PrimalLinearSVC(C=C).fit(X.astype(np.float32), y)
    assert m32.coef_.dtype == np.float32 and m32.intercept_.dtype == np.float32
    for (y_pm, w32, b32), (_, w64, b64) in zip(_per_class(m32, y), _per_class(m64, y),
                                               strict=True):
        _, g32 = _objective_and_gradient(X, y_pm, w32.astype(np.float64), float(b32), C)
        _, g64 = _objective_and_gradient(X, y_pm, w64, b64, C)
        bound = np.linalg.norm(g32) + np.linalg.norm(g64)
        assert np.linalg.norm(np.append(w32 - w64, b32 - b64)) <= bound
        assert bound < 1e-2 * np.linalg.norm(w64)  # a point near the optimum, not anywhere


def test_unpreconditioned_cg_reaches_the_same_minimiser(digits):
    X, y = digits
    reference = PrimalLinearSVC(C=0.1, precondition="gram").fit(X, y)
    plain = PrimalLinearSVC(C=0.1, precondition="none").fit(X, y)
    for (y_pm, w, b), (_, w_r, b_r) in zip(_per_class(plain, y), _per_class(reference, y),
                                           strict=True):
        _, g = _objective_and_gradient(X, y_pm, w, b, 0.1)
        _, g_r = _objective_and_gradient(X, y_pm, w_r, b_r, 0.1)
        bound = np.linalg.norm(g) + np.linalg.norm(g_r)
        assert np.linalg.norm(np.append(w - w_r, b - b_r)) <= bound


def test_max_iter_stop_warns(digits):
    X, y = digits
    with pytest.warns(ConvergenceWarning, match=r"^PrimalLinearSVC stopped 10 class problem\(s\) "
                      r"at max_iter=1 Newton iterations before the tolerance; increase "
                      r"max_iter\.$"):
        model = PrimalLinearSVC(C=0.1, max_iter=1).fit(X, y)
    assert model.n_iter_ == 1


@pytest.mark.parametrize(("params", "message"), [
    ({"C": 0.0}, "C must be > 0"), ({"C": -1.0}, "C must be > 0"),
    ({"C": float("nan")}, "C must be a finite real number"),
    ({"tol": 0.0}, "tol must be > 0"), ({"max_iter": 0}, "max_iter must be >= 1"),
    ({"precondition": "jacobi"}, "precondition must be one of"),
])
def test_bad_parameters_are_refused(digits, params, message):
    X, y = digits
    with pytest.raises(ValueError, match=message):
        PrimalLinearSVC(**params).fit(X, y)


def test_bad_input_is_refused(digits):
    X, y = digits
    bad = X.copy()
    bad[3, 5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        PrimalLinearSVC().fit(bad, y)
    with pytest.raises(TypeError, match="dense data is required"):
        PrimalLinearSVC().fit(sp.csr_matrix(X), y)
    with pytest.raises(InvalidInputError, match=r"^This solver needs samples of at least 2 "
                       r"classes in the data, but the data contains only one class: 3\.$"):
        PrimalLinearSVC().fit(X[y == 3], y[y == 3])
    model = PrimalLinearSVC().fit(X, y)
    with pytest.raises(ValueError, match="64 features"):
        model.predict(X[:, :10])


@parametrize_with_checks([PrimalLinearSVC()])
def test_scikit_learn_api(estimator, check):
    check(estimator)


def _rule_holds(model, X, y, C, tol):
    """liblinear's stopping rule, evaluated by the test's own gradient, for every class."""
    n = len(y)
    for y_pm, w, b in _per_class(model, y):
        _, g = _objective_and_gradient(X, y_pm, w.astype(np.float64), float(b), C)
        _, g0 = _objective_and_gradient(X, y_pm, np.zeros(X.shape[1]), 0.0, C)
        n_pos = int((y_pm > 0).sum())
        if np.linalg.norm(g) > tol * max(min(n_pos, n - n_pos), 1) / n * np.linalg.norm(g0):
            return False
    return True


@pytest.mark.parametrize("labels", ["ten-classes", "even-vs-odd", "nonzero-vs-zero",
                                    "one-row-of-zero"])
def test_stops_at_the_first_iterate_that_meets_liblinears_rule(digits, labels):
    # a stricter rule than liblinear's (every class's threshold at its floor of 1/n, say)
    # still reaches the minimiser, only with Newton iterations that change nothing a
    # user sees: the iterate one before the last must not meet the rule yet. The rule's
    # min(n+, n-) and its floor of 1 are reached by a majority second class (nonzero
    # digits) and by a class of one row
    X, y = digits
    if labels == "even-vs-odd":
        y = y % 2
    elif labels == "nonzero-vs-zero":
        y = (y != 0).astype(int)
    elif labels == "one-row-of-zero":
        keep = (y != 0) | (np.arange(len(y)) == np.flatnonzero(y == 0)[0])
        X, y = X[keep], (y[keep] != 0).astype(int)
    # (tol chosen so that an iterate's gradient lies between the rule's threshold and
    # twice it: 0.27 of g0 / n at the fifth iterate of the one-row problem)
    C, tol = 0.1, {"nonzero-vs-zero": 0.3, "one-row-of-zero": 0.2}.get(labels, 1e-3)
    model = PrimalLinearSVC(C=C, tol=tol).fit(X, y)
    assert model.n_iter_ >= 2 and _rule_holds(model, X, y, C, tol)
    with pytest.warns(ConvergenceWarning):
        before = PrimalLinearSVC(C=C, tol=tol, max_iter=model.n_iter_ - 1).fit(X, y)
    assert not _rule_holds(before, X, y, C, tol)


def test_the_gram_preconditioner_is_used_exactly_when_asked():
    # the same minimiser either way (test_unpreconditioned_cg_reaches_the_same_minimiser);
    # what the option changes is the number of CG steps, which it cuts on unscaled
    # columns (the demo's raw pixels / 16): 25 against 101 when this test was written
    X, y = load_digits(return_X_y=True)
    X, y = X / 16.0, y % 2
    steps = {p: PrimalLinearSVC(C=1.0, precondition=p).fit(X, y).n_cg_iter_
             for p in ("gram", "none", "auto")}
    assert 2 * steps["gram"] < steps["none"]
    assert steps["auto"] == steps["gram"]  # 64 features and 1,797 rows: "gram"


def test_a_row_on_the_hyperplane_goes_to_the_first_class_as_in_linearsvc():
    # symmetric rows: the intercept stays exactly 0, and x = 0 has decision value 0, which
    # LinearSVC (decision > 0 is the second class) gives to the first class
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [2.0, 1.0], [-2.0, -1.0]])
    y = np.array(["a", "b", "a", "b"])
    model = PrimalLinearSVC(C=1.0).fit(X, y)
    theirs = LinearSVC(C=1.0, dual=False).fit(X, y)
    zero = np.zeros((1, 2))
    assert model.decision_function(zero)[0] == 0.0
    assert theirs.decision_function(zero)[0] == 0.0
    assert model.predict(zero)[0] == theirs.predict(zero)[0] == "a"


def test_predict_refuses_sparse_rows_as_fit_does(digits):
    X, y = digits
    model = PrimalLinearSVC(C=0.1).fit(X[:300], y[:300])
    with pytest.raises(TypeError, match="dense data is required"):
        model.predict(sp.csr_matrix(X[:5]))


def test_rows_that_favour_no_hyperplane_give_the_zero_model_at_once():
    # the same rows labelled both ways: the gradient at w = 0, b = 0 is exactly 0, so the
    # minimiser is 0, reached with no Newton iteration, no CG step and no warning
    import warnings

    X = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, -1.0], [3.0, -1.0]])
    y = np.array([0, 1, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = PrimalLinearSVC(C=1.0, max_iter=5).fit(X, y)
    assert not model.coef_.any() and not model.intercept_.any()
    assert (model.n_iter_, model.n_cg_iter_) == (0, 0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # max_iter=1
@pytest.mark.parametrize("n_features", [1, 64])
def test_the_first_newton_step_takes_one_preconditioned_cg_step(n_features):
    # at w = 0 every row is active (y z = 0 < 1), so the "gram" preconditioner
    # I + 2C (|A|/n) [X 1]^T [X 1] is the Hessian itself: CG solves the first Newton
    # system in exactly one step
    X, y = load_digits(return_X_y=True)
    X, y = X[:, 20:20 + n_features] / 16.0, y % 2
    model = PrimalLinearSVC(C=1.0, max_iter=1, precondition="gram").fit(X, y)
    assert (model.n_iter_, model.n_cg_iter_) == (1, 1)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # max_iter=1
@pytest.mark.parametrize("C", [1.0, 0.1])
def test_the_first_newton_step_takes_one_cg_step_when_a_feature_is_in_small_units(C):
    # a feature measured in units 100 times too small (0.01 per unit) gives the Gram
    # matrix [X 1]^T [X 1] an eigenvalue below 1, where the preconditioner's "I +" term
    # matters: it must still be the Hessian at w = 0 (every row active), so the first
    # Newton system is solved in one CG step. A preconditioner wrong only there (the
    # eigenvalues floored at 1, 2 + for 1 +, the scale divided) needs a second step
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 1000)
    y_pm = 2.0 * y - 1.0
    X = np.column_stack([rng.normal(size=1000) + 0.05 * y_pm,
                         0.01 * (y_pm + 0.3 * rng.normal(size=1000))])
    model = PrimalLinearSVC(C=C, max_iter=1, precondition="gram").fit(X, y)
    assert (model.n_iter_, model.n_cg_iter_) == (1, 1)


def test_n_cg_iter_counts_the_cg_steps_of_every_newton_iteration():
    # each Newton iteration takes at least one CG step (a pass over X), so the count in
    # all is at least the iterations': 9 iterations on the raw pixels / 16 at a tight tol
    X, y = load_digits(return_X_y=True)
    model = PrimalLinearSVC(C=10.0, tol=1e-8, precondition="gram").fit(X / 16.0, y % 2)
    assert model.n_iter_ >= 2 and model.n_cg_iter_ >= model.n_iter_


def _plain_cg_steps(A, b, relative):
    """Steps of unpreconditioned CG on ``A d = b`` from 0 until ``‖b - A d‖ <= relative ‖b‖``."""
    r = b.copy()
    p = r.copy()
    for step in range(1, len(b) + 1):
        Ap = A @ p
        a = (r @ r) / (p @ Ap)
        r_next = r - a * Ap
        if np.linalg.norm(r_next) <= relative * np.linalg.norm(b):
            return step
        p = r_next + (r_next @ r_next) / (r @ r) * p
        r = r_next
    raise AssertionError("CG did not converge")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # max_iter=1
@pytest.mark.parametrize(("binary", "expected"), [(True, 5), (False, 2)],
                         ids=["even-vs-odd", "ten-classes"])
def test_cg_stops_at_liblinears_inner_tolerance(binary, expected):
    # liblinear's Newton method solves each Hessian system by CG to a residual of 0.1 of
    # the gradient; n_cg_iter_ counts the passes over X that costs. At w = 0 every row
    # is active, so the first system is (I + 2C [X 1]^T [X 1]) d = -grad f(0), solved
    # here by a CG of the test's own. Even vs odd: 5 steps (the residual 0.11 of the
    # gradient after 4, 0.07 after 5: far from 0.1 next to rounding). Ten classes take
    # their CG steps together, each stopping at its own residual: the slowest's 2 steps
    X, y = load_digits(return_X_y=True)
    X, y = X / 16.0, (y % 2 if binary else y)
    C = 1.0
    A = np.column_stack([X, np.ones(len(X))])
    hessian = np.eye(A.shape[1]) + 2.0 * C * A.T @ A
    problems = [y == 1] if binary else [y == c for c in range(10)]
    steps = [_plain_cg_steps(hessian, 2.0 * C * A.T @ np.where(on, 1.0, -1.0), 0.1)
             for on in problems]
    assert max(steps) == expected
    model = PrimalLinearSVC(C=C, max_iter=1, precondition="none").fit(X, y)
    assert (model.n_iter_, model.n_cg_iter_) == (1, expected)


@pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")
def test_rows_beyond_one_cache_block_reach_liblinears_minimiser(digits):
    # a CG step reads X in row blocks of 1 MiB (873 rows of 150 float64 features here):
    # random features of the digits take two whole blocks and a partial one, where the
    # other tests' 64 columns fit in one. (max_iter=100 only bounds the time: Newton's
    # method takes 5 iterations here; with a wrong Hessian product it creeps along)
    X, y = digits
    rng = np.random.default_rng(0)
    Z = np.cos(X @ rng.normal(scale=0.1, size=(X.shape[1], 150)) + rng.uniform(0, 6.3, 150))
    y = y % 2
    C = 0.1
    ours = PrimalLinearSVC(C=C, max_iter=100).fit(Z, y)
    theirs = LinearSVC(C=C, dual=False, tol=1e-8, max_iter=10000).fit(Z, y)
    (y_pm, w, b), = _per_class(ours, y)
    (_, w_l, b_l), = _per_class(theirs, y)
    _, g = _objective_and_gradient(Z, y_pm, w, b, C)
    _, g_l = _objective_and_gradient(Z, y_pm, w_l, b_l, C)
    assert np.linalg.norm(np.append(w - w_l, b - b_l)) <= np.linalg.norm(g) + np.linalg.norm(g_l)
    assert np.linalg.norm(g) < 1e-2 * np.linalg.norm(w)  # near the optimum, not anywhere


def test_integer_features_are_fit_as_float64():
    # pixel counts 0..16 kept as integers (as an image file holds them) are fit as their
    # float64 values (as LinearSVC does), not in integer arithmetic
    X, y = load_digits(return_X_y=True)
    model = PrimalLinearSVC().fit(X.astype(np.int64), y)
    reference = PrimalLinearSVC().fit(X, y)
    assert model.coef_.dtype == np.float64
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    np.testing.assert_array_equal(model.intercept_, reference.intercept_)


def test_two_rows_of_two_classes_are_enough_and_one_row_is_refused():
    X, y = load_digits(return_X_y=True)
    model = PrimalLinearSVC().fit(X[:2], y[:2])
    np.testing.assert_array_equal(model.predict(X[:2]), y[:2])
    with pytest.raises(InvalidInputError, match=r"1 sample\(s\) .* a minimum of 2 is required"):
        PrimalLinearSVC().fit(X[:1], y[:1])


@pytest.mark.parametrize(("n_rows", "expected"), [(22, "gram"), (21, "none")])
def test_auto_preconditions_from_twice_as_many_rows_as_features_and_the_intercept(n_rows,
                                                                                  expected):
    # "auto" uses the Gram preconditioner with at least 2 (k + 1) rows: 22 for these 10
    # features of very different scales, where it saves CG steps (its eigendecomposition
    # is paid back). The option's choice shows in the steps it takes
    X, y = load_digits(return_X_y=True)
    X, y = X[:n_rows, 18:28] * np.geomspace(0.01, 10, 10), y[:n_rows] % 2
    steps = {p: PrimalLinearSVC(precondition=p).fit(X, y).n_cg_iter_
             for p in ("gram", "none", "auto")}
    assert steps["gram"] != steps["none"]
    assert steps["auto"] == steps[expected]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # max_iter=1
@pytest.mark.parametrize("precondition", ["gram", "none"])
def test_the_newton_step_length_minimises_the_objective_along_the_step(digits, precondition):
    # the step length is exact: from w = 0 the first iterate is alpha * d, so f is minimal
    # along the ray through it, where its slope grad f(w1) . w1 is 0. The line search
    # stops at a relative change of 1e-12 in alpha: 1e-9 of |grad f(0)| |w1| is rounding
    X, y = digits
    C = 0.1
    model = PrimalLinearSVC(C=C, max_iter=1, precondition=precondition).fit(X, y)
    for y_pm, w, b in _per_class(model, y):
        _, g = _objective_and_gradient(X, y_pm, w, b, C)
        _, g0 = _objective_and_gradient(X, y_pm, np.zeros_like(w), 0.0, C)
        w1 = np.append(w, b)
        assert abs(g @ w1) <= 1e-9 * np.linalg.norm(g0) * np.linalg.norm(w1)


def _plain_cg(A, b, relative):
    """Unpreconditioned CG on ``A d = b`` from 0 until ``‖b - A d‖ <= relative ‖b‖``: (d, steps)."""
    d, r = np.zeros_like(b), b.copy()
    p = r.copy()
    for step in range(1, len(b) + 1):
        Ap = A @ p
        a = (r @ r) / (p @ Ap)
        d += a * p
        r_next = r - a * Ap
        if np.linalg.norm(r_next) <= relative * np.linalg.norm(b):
            return d, step
        p = r_next + (r_next @ r_next) / (r @ r) * p
        r = r_next
    raise AssertionError("CG did not converge")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # max_iter=1
def test_the_first_newton_direction_uses_the_rows_of_every_cache_block(digits):
    # random features of the digits read in row blocks of 1 MiB (873 rows of 150 float64
    # features): 2 x 873 - 1 rows leave a last block of 872, nearly half of the rows. At
    # w = 0 every row is active, so the first Newton system is (I + 2C [X 1]^T [X 1]) d =
    # 2C [X 1]^T y over all of them. The test's own CG to liblinear's 0.1 gives d; the
    # exact line search only scales it, so the first iterate is parallel to d (up to
    # rounding: a few CG steps in float64). A Hessian product that loses a block's rows
    # turns the direction (one CG step would not show it: its direction is the gradient's)
    X, y = digits
    rows = _BLOCK_BYTES // (150 * 8)
    rng = np.random.default_rng(0)
    Z = np.cos(X @ rng.normal(scale=0.1, size=(X.shape[1], 150)) + rng.uniform(0, 6.3, 150))
    Z, y_pm = Z[:2 * rows - 1], np.where(y[:2 * rows - 1] % 2 == 1, 1.0, -1.0)
    C = 0.1
    A = np.column_stack([Z, np.ones(len(Z))])
    d, steps = _plain_cg(np.eye(A.shape[1]) + 2.0 * C * A.T @ A, 2.0 * C * A.T @ y_pm, 0.1)
    assert steps >= 2
    model = PrimalLinearSVC(C=C, max_iter=1, precondition="none").fit(Z, y_pm)
    w1 = np.append(model.coef_[0], model.intercept_[0])
    assert model.n_cg_iter_ == steps
    np.testing.assert_allclose(w1 / np.linalg.norm(w1), d / np.linalg.norm(d), atol=1e-9)
