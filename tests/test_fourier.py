"""dkrp.features.fourier: random Fourier features (Rahimi & Recht 2007).

Unbiasedness over seeds (see test_polynomial.py for the band), the lower variance
of the cos/sin pair form, and the kernel-approximation error against its theory.
"""

import re

import numpy as np
import pytest
from conftest import assert_projects_into_out, peak_allocation

import dkrp
from dkrp.kernels import kernel_matrix
from dkrp.metrics import kernel_approximation_error
from dkrp.testing import assert_unbiased as _assert_unbiased
from dkrp.testing import estimates_over_seeds


def _pairs_data(d=5, n=4, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * 1.3


def _estimates(make, X, n_seeds):
    return estimates_over_seeds(make, X, n_seeds)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
@pytest.mark.parametrize("feature_map", ["cos", "cos_sin"])
def test_rff_unbiased(kernel, feature_map):
    X = _pairs_data(d=3)
    gamma = 0.3
    K = kernel_matrix(X, kernel=kernel, gamma=gamma)

    def make(seed):
        return dkrp.RandomFourierFeatures(
            kernel=kernel, gamma=gamma, n_components=20, feature_map=feature_map,
            random_state=seed,
        )

    grams, _ = _estimates(make, X, n_seeds=800)
    _assert_unbiased(grams, K, f"RFF {kernel} {feature_map}")


def test_rff_pair_form_has_lower_variance():
    X = _pairs_data(d=3)
    spread = {}
    for fm in ("cos", "cos_sin"):
        grams, _ = _estimates(
            lambda s, fm=fm: dkrp.RandomFourierFeatures(gamma=0.3, n_components=20,
                                                        feature_map=fm, random_state=s),
            X, n_seeds=600,
        )
        spread[fm] = grams.var(axis=0)[np.triu_indices(len(X), 1)].mean()
    assert spread["cos_sin"] < spread["cos"]


def _theory_relative_frobenius(K, variance):
    """sqrt(E||ZZ^T - K||_F^2) / ||K||_F for an unbiased estimator with these variances."""
    return float(np.sqrt(variance.sum()) / np.linalg.norm(K))


@pytest.mark.parametrize("seed", range(20))
def test_kernel_approximation_error_near_theory_for_every_seed(seed):
    rng = np.random.default_rng(100 + seed)
    X = rng.standard_normal((60, 8)) / np.sqrt(8)
    k = 3000
    # RFF, phase form: Var = (1 + K(2δ)/2 - K(δ)^2) / D, with K(2δ) = K(δ)^4 (Gaussian).
    K = kernel_matrix(X, kernel="gaussian", gamma=0.5)
    theory = _theory_relative_frobenius(K, (1 + K**4 / 2 - K**2) / k)
    rff = dkrp.RandomFourierFeatures(gamma=0.5, n_components=k, random_state=seed).fit(X)
    err = kernel_approximation_error(X, rff.transform(X), "gaussian", gamma=0.5)
    assert 0.5 * theory < err.relative_frobenius < 1.6 * theory
    # A Gaussian RP of φ: Var<f(x), f(y)> = (K(x,x) K(y,y) + K(x,y)^2) / k; KRP's shared
    # pool (p = k here, t = 1) adds an O(1/p) term of the same order (1.5-1.8x measured
    # over 40 seeds), so the band is wider.
    K = kernel_matrix(X, kernel="homogeneous_polynomial", degree=2)
    d = np.diag(K)
    theory = _theory_relative_frobenius(K, (np.outer(d, d) + K**2) / k)
    krp = dkrp.PolynomialRandomProjection(degree=2, n_components=k, n_hyperplanes=k,
                                          random_state=seed).fit(X)
    err = kernel_approximation_error(X, krp.transform(X), "homogeneous_polynomial", degree=2)
    assert 0.8 * theory < err.relative_frobenius < 2.2 * theory


def test_kernel_error_shrinks_with_more_components():
    X = np.random.default_rng(7).standard_normal((60, 8)) / np.sqrt(8)
    errors = []
    for k in (100, 400, 1600):
        e = [
            kernel_approximation_error(
                X,
                dkrp.RandomFourierFeatures(gamma=0.5, n_components=k, random_state=s)
                .fit(X).transform(X),
                "gaussian", gamma=0.5,
            ).mse
            for s in range(10)
        ]
        errors.append(np.mean(e))
    # Monte Carlo: mse ~ 1/k, so each 4x step cuts it by ~4 (allow 2.5).
    assert errors[0] / errors[1] > 2.5 and errors[1] / errors[2] > 2.5


# -- parameters, attributes and the cosine (written for the survivors of a mutation run,
#    tests/MUTATION.md) ------------------------------------------------------------------


def test_rff_default_parameters_and_fitted_attributes():
    assert dkrp.RandomFourierFeatures().get_params() == {
        "kernel": "gaussian", "gamma": 1.0, "n_components": 100, "feature_map": "cos",
        "pool": "iid", "random_state": None,
    }
    rff = dkrp.RandomFourierFeatures(n_components=6, random_state=0).fit_n_features(3)
    assert rff.n_components_ == 6 and rff.gamma_ == 1.0
    assert rff.uses_fwht_ is False
    # a new fit uses the compiled cosine, version 2; "dkrp" and "numpy" are only for
    # specs written before them
    assert rff.cosine_ == "dkrp2" and rff.to_spec()["fitted"]["cosine_"] == "dkrp2"
    spec = rff.to_spec()
    del spec["fitted"]["cosine_"], spec["params_checksum"]  # as dkrp <= 0.1 wrote it
    assert dkrp.from_spec(spec).cosine_ == "numpy"
    spec["fitted"]["cosine_"] = "libm"
    with pytest.raises(ValueError,
                       match=re.escape(
                           "cosine_ must be one of 'dkrp2', 'dkrp', 'numpy'; got 'libm'.")):
        dkrp.from_spec(spec)


@pytest.mark.parametrize(
    "params, n_features, message",
    [
        ({"kernel": "cauchy"}, 3, "kernel must be one of 'gaussian', 'laplacian'; got 'cauchy'."),
        ({"feature_map": "sin"}, 3, "feature_map must be one of 'cos', 'cos_sin'; got 'sin'."),
        ({"n_components": 0}, 3, "n_components must be >= 1, got 0."),
        ({"n_components": 2.5}, 3, "n_components must be an integer, got 2.5 of type float."),
        ({"pool": "hadamard"}, 3,
         "pool must be one of 'iid', 'orthogonal', 'structured'; got 'hadamard'."),
        ({"kernel": "laplacian", "pool": "orthogonal"}, 3,
         "pool='orthogonal' is defined for kernel='gaussian' only (its rows approximate "
         "Gaussian frequencies); got kernel='laplacian'."),
        ({"feature_map": "cos_sin", "n_components": 7}, 3,
         "n_components must be even with feature_map='cos_sin' (a cosine and a sine per "
         "frequency); got 7."),
        ({"gamma": "auto"}, 3, "gamma must be one of 'scale'; got 'auto'."),
        ({"gamma": 0.0}, 3, "gamma must be > 0.0, got 0.0."),
        ({"gamma": -1.0}, 3, "gamma must be > 0.0, got -1.0."),
        ({"gamma": "scale"}, 3,
         "gamma='scale' is computed from training data: call fit(X), or give a number "
         "for gamma."),
        ({"pool": "structured", "n_components": 2**17}, 2**17 + 1,
         "pool='structured' supports at most 2**17 = 131072 features, got n_features = "
         "131073."),
    ],
)
def test_rff_refuses_bad_parameters_with_their_message(params, n_features, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        dkrp.RandomFourierFeatures(**params).fit_n_features(n_features)


@pytest.mark.parametrize(
    "params, n_features",
    [
        ({"n_components": 1}, 3),
        ({"gamma": 1e-300}, 3),
        ({"gamma": 0.5, "pool": "orthogonal"}, 3),
        ({"n_components": 1}, 2**17 + 1),  # only the structured pool has a limit
    ],
)
def test_rff_accepts_parameters_at_their_limits(params, n_features):
    rff = dkrp.RandomFourierFeatures(random_state=0, **params).fit_n_features(n_features)
    assert rff.n_components_ == params.get("n_components", 100)


def test_rff_structured_pool_limit_is_inclusive():
    # Checked on the parameters alone: a fit at d = 2**17 is cheap on the FWHT path, but
    # a bug that took the GEMM path there would materialise a 2**17 x 2**17 pool.
    dkrp.RandomFourierFeatures(pool="structured", n_components=2**17)._resolve_params(2**17)


def test_rff_gamma_scale_is_the_width_of_its_kernel():
    X = np.random.default_rng(0).uniform(0.0, 3.0, (50, 4))
    assert X.std() != X.var()
    for kernel, spread in (("gaussian", X.var()), ("laplacian", X.std())):
        rff = dkrp.RandomFourierFeatures(kernel=kernel, gamma="scale", random_state=0).fit(X)
        assert rff.gamma_ == pytest.approx(1.0 / (4 * spread), rel=1e-12)


@pytest.mark.parametrize("d, fwht", [(20, False), (300, True)])
def test_rff_structured_pool_path_and_its_scale(d, fwht):
    # FWHT for d = 300 (p = 512), GEMM for d = 20: both give sqrt(2 gamma) S x for the
    # materialised structured pool S, with gamma != 0.5 and != 1 so that sqrt(2 gamma),
    # sqrt(2 / gamma) and sqrt(gamma) all differ.
    from dkrp.features._pools import structured_pool

    X = np.random.default_rng(3).standard_normal((7, d))
    gamma = 0.03
    rff = dkrp.RandomFourierFeatures(gamma=gamma, n_components=512, pool="structured",
                                     random_state=0).fit(X)
    assert rff.uses_fwht_ is fwht
    assert (rff.random_weights_ is None) is fwht
    assert set(rff._state_arrays()) == ({"signs", "offset"} if fwht
                                        else {"signs", "offset", "weights"})
    S = structured_pool(rff.pool_signs_, 512, d)
    np.testing.assert_allclose(rff._project_block(X, np.float64),
                               np.sqrt(2 * gamma) * X @ S.T, rtol=1e-10, atol=1e-12)
    X32 = X.astype(np.float32)
    assert rff._project_block(X32, np.float32).dtype == np.float32


@pytest.mark.parametrize("kernel, feature_map", [("gaussian", "cos"), ("laplacian", "cos_sin")])
def test_rff_transform_is_cosine_features_of_its_own_projection(kernel, feature_map):
    # float32 in, float32 GEMM, offset and cosine: byte-identical to cosine_features
    # applied to X32 @ W32.T (a GEMM or an offset in float64 rounds otherwise); and a
    # spec of dkrp <= 0.1 (no cosine_ recorded) computes numpy's cosine.
    from dkrp.features.fourier import cosine_features

    X = np.random.default_rng(4).standard_normal((30, 20))
    rff = dkrp.RandomFourierFeatures(kernel=kernel, gamma=0.7, n_components=64,
                                     feature_map=feature_map, random_state=1).fit(X)
    m = rff.random_weights_.shape[0]
    for dtype, cosine, est in [(np.float32, "dkrp2", rff), (np.float64, "dkrp2", rff)] + [
        (dt, "numpy", dkrp.from_spec({**rff.to_spec(), "fitted": {"gamma_": 0.7},
                                      "params_checksum": None}))
        for dt in (np.float32, np.float64)
    ]:
        Xd = X.astype(dtype)
        W = rff.random_weights_.astype(dtype)
        expected = cosine_features(30, dtype, lambda a, b, out=None, Xd=Xd, W=W: Xd[a:b] @ W.T,
                                   rff.random_offset_.astype(dtype), 64, feature_map,
                                   np.sqrt(2.0 / 64), cosine=cosine)
        assert est.cosine_ == cosine and m == (64 if feature_map == "cos" else 32)
        assert est.transform(Xd).tobytes() == expected.tobytes()


def _reference_features(proj, offset, scale, feature_map, dtype, cosine):
    """``scale * cos(proj + offset)`` (or the cos/sin pair) with the roundings of
    :func:`dkrp.features.fourier.cosine_features`: the sum and the product in ``dtype``;
    the cosine in float64 rounded once (``"dkrp2"``, ``"dkrp"``) or numpy's in ``dtype``."""
    if feature_map == "cos":
        x = [proj + offset]
        funcs = [np.cos]
    else:
        x = [proj, proj]
        funcs = [np.cos, np.sin]
    if cosine != "numpy":
        parts = [f(v.astype(np.float64)).astype(dtype) for f, v in zip(funcs, x, strict=True)]
    else:
        parts = [f(v) for f, v in zip(funcs, x, strict=True)]
    return np.hstack(parts) * dtype(scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("feature_map", ["cos", "cos_sin"])
@pytest.mark.parametrize("cosine", ["dkrp2", "dkrp", "numpy"])
def test_cosine_features_follow_their_formula_over_row_blocks(cosine, feature_map, dtype):
    from dkrp.features.fourier import ROW_BLOCK, cosine_features

    rng = np.random.default_rng(5)
    n, m = 2 * ROW_BLOCK + 37, 6  # two whole row blocks and a partial one
    # Arguments up to 1e4: proj + offset rounded in float32 is then off by up to 5e-4
    # from the exact sum, so a sum kept in float64 changes the features by far more
    # than the tolerance below.
    proj = rng.uniform(-1e4, 1e4, (n, m)).astype(dtype)
    offset = (rng.uniform(0.0, 2 * np.pi, m) if feature_map == "cos"
              else np.zeros(m)).astype(dtype)
    k = m if feature_map == "cos" else 2 * m
    scale = np.sqrt(2.0 / k)
    calls = []

    def project(start, stop, out=None):
        calls.append((start, stop))
        return proj[start:stop].copy()

    Z = cosine_features(n, dtype, project, offset, k, feature_map, scale, cosine=cosine)
    assert Z.dtype == dtype and Z.shape == (n, k)
    assert sorted(calls) == [(0, ROW_BLOCK), (ROW_BLOCK, 2 * ROW_BLOCK), (2 * ROW_BLOCK, n)]
    ref = _reference_features(proj, offset, scale, feature_map, dtype, cosine)
    if cosine == "numpy":
        # the same numpy operations: byte-identical, as specs of dkrp <= 0.1 need
        assert Z.tobytes() == ref.tobytes()
    else:
        # the compiled cosine is within 1 ulp of the exact value, not correctly rounded
        np.testing.assert_allclose(Z, ref, rtol=0, atol=2 * np.finfo(dtype).eps * scale)
        # and it is the compiled cosine (and sine) of dkrp.features._trig, of the
        # spec's kernel version, bit for bit; that differs from numpy's in the last bit
        # of hundreds of these features
        from dkrp.features import _trig

        version = {"dkrp2": 2, "dkrp": 1}[cosine]
        x = proj + offset if feature_map == "cos" else proj
        parts = [_trig.cos(x, version)]
        parts += [_trig.sin(x, version)] if feature_map == "cos_sin" else []
        assert Z.tobytes() == (np.hstack(parts) * dtype(scale)).tobytes()
        default = cosine_features(n, dtype, project, offset, k, feature_map, scale)
        # "dkrp2" is the default
        assert (default.tobytes() == Z.tobytes()) == (cosine == "dkrp2" or dtype == np.float64)


@pytest.mark.parametrize("cosine", ["dkrp2", "dkrp"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("feature_map", ["cos", "cos_sin"])
def test_cosine_features_project_into_the_output_and_fall_back_beyond_the_reduction_range(
        feature_map, dtype, cosine):
    # A project that writes into the ``out`` it is offered, as the GEMM of
    # RandomFourierFeatures does. The cos map offers the output's own row block (the
    # cosine then replaces it in place), the cos/sin map a work array of the block's
    # shape. Arguments beyond the compiled reduction's range (2**20) in the first and
    # the last row block send those blocks of the cos map to the fallback, which
    # projects them again without ``out`` and takes numpy's cosine there.
    from dkrp.features._trig import REDUCTION_LIMIT
    from dkrp.features.fourier import ROW_BLOCK, cosine_features

    rng = np.random.default_rng(6)
    n, m = 2 * ROW_BLOCK + 37, 6
    proj = rng.uniform(-10.0, 10.0, (n, m)).astype(dtype)
    proj[3, 1], proj[n - 2, 4] = 1e12, -1e15
    assert abs(float(proj[3, 1])) > REDUCTION_LIMIT
    offset = (rng.uniform(0.0, 2 * np.pi, m) if feature_map == "cos"
              else np.zeros(m)).astype(dtype)
    k = m if feature_map == "cos" else 2 * m
    scale = np.sqrt(2.0 / k)
    calls, offered = [], []

    def project(start, stop, out=None):
        calls.append((start, stop, out is None))
        if out is None:
            return proj[start:stop].copy()
        offered.append(out)
        out[...] = proj[start:stop]
        return out

    Z = cosine_features(n, dtype, project, offset, k, feature_map, scale, cosine=cosine)
    ref = _reference_features(proj, offset, scale, feature_map, dtype, cosine)
    np.testing.assert_allclose(Z, ref, rtol=0, atol=2 * np.finfo(dtype).eps * scale)
    # the bits of the spec's kernel version on every path, the fallback's included
    # (version 1's float32 features differ from version 2's in the last bit): those of
    # a project that offers no place to write, whose blocks never take the in-place path
    copies = cosine_features(n, dtype, lambda start, stop, out=None: proj[start:stop].copy(),
                             offset, k, feature_map, scale, cosine=cosine)
    assert Z.tobytes() == copies.tobytes()
    blocks = [(0, ROW_BLOCK), (ROW_BLOCK, 2 * ROW_BLOCK), (2 * ROW_BLOCK, n)]
    again = [(0, ROW_BLOCK, True), (2 * ROW_BLOCK, n, True)] if feature_map == "cos" else []
    assert sorted(calls) == sorted([(a, b, False) for a, b in blocks] + again)
    for out in offered:
        assert out.dtype == dtype and out.flags.c_contiguous and out.shape[1] == m
        assert np.shares_memory(out, Z) == (feature_map == "cos")
    assert sorted(o.shape[0] for o in offered) == sorted(b - a for a, b in blocks)


@pytest.mark.parametrize("pool, d", [("iid", 20), ("structured", 300)])
def test_rff_project_block_writes_into_the_out_it_is_given(pool, d):
    # the GEMM (or the FWHT) writes into ``out`` and returns it: the same bits as
    # without ``out``, and no new array
    X = np.random.default_rng(7).standard_normal((40, d))
    rff = dkrp.RandomFourierFeatures(gamma=0.03, n_components=512, pool=pool,
                                     random_state=2).fit(X)
    assert rff.uses_fwht_ == (pool == "structured")
    assert_projects_into_out(rff, X, 512)


def test_rff_cos_map_projects_into_its_own_output():
    # The cos map's projections are written into the output block and the cosine
    # replaces them in place: besides the output, a transform allocates far less
    # than one row block of projections (2 MiB here).
    from dkrp.features.fourier import ROW_BLOCK

    X = np.random.default_rng(8).standard_normal((4 * ROW_BLOCK, 8))
    rff = dkrp.RandomFourierFeatures(n_components=256, random_state=0).fit(X)
    rff.transform(X[:5])  # compiled kernels and cast arrays ready
    Z, peak = peak_allocation(lambda: rff._transform_array(X))
    assert Z.nbytes <= peak < Z.nbytes + ROW_BLOCK * 256 * 8 // 4


def test_cosine_features_refuse_an_unknown_cosine():
    from dkrp.features.fourier import cosine_features

    with pytest.raises(ValueError,
                       match=re.escape(
                           "cosine must be one of 'dkrp2', 'dkrp', 'numpy'; got 'libm'.")):
        cosine_features(2, np.float64, lambda a, b, out=None: np.zeros((b - a, 2)), np.zeros(2), 2,
                        "cos", 1.0, cosine="libm")
