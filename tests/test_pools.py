"""Hyperplane pools and index designs (issue 5): defining properties, seed contract,
the documented O(1/p) bias, lower RFF variance, and the MNIST distortion targets."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import hadamard
from sklearn.utils.estimator_checks import parametrize_with_checks

import dkrp
from dkrp._random import draw_rows
from dkrp.features._fwht import fwht
from dkrp.features._pools import (
    balanced_indices,
    krp_pool_bias,
    orthogonal_pool,
    padded_size,
    structured_pool,
    structured_project,
    structured_signs,
    tight_frame_pool,
    use_fwht,
)
from dkrp.kernels import kernel_matrix
from dkrp.metrics import distance_distortion, kernel_approximation_error

KRP_POOLS = ["iid", "orthogonal", "tight_frame", "structured"]
Z_BAND = 4.5


def _krp(pool, index_design="random", **kw):
    params = dict(degree=2, n_components=60, n_hyperplanes=512, n_terms=3, random_state=3)
    params.update(kw)
    return dkrp.PolynomialRandomProjection(pool=pool, index_design=index_design, **params)


# -- the pools' defining properties ------------------------------------------------
@pytest.mark.parametrize("p, d", [(40, 7), (256, 256), (5, 9), (1, 5)])
def test_tight_frame_is_tight(p, d):
    R = tight_frame_pool(4, p, d)
    assert R.shape == (p, d)
    if p >= d:
        np.testing.assert_allclose(R.T @ R, p * np.eye(d), atol=1e-9 * p)
    else:  # fewer rows than features: orthogonal rows of norm sqrt(d)
        np.testing.assert_allclose(R @ R.T, d * np.eye(p), atol=1e-9 * d)


def test_orthogonal_pool_blocks_are_orthogonal_with_chi_norms():
    d, p = 16, 40  # two full blocks and a partial one
    R = orthogonal_pool(1, p, d)
    for start in range(0, p, d):
        block = R[start : start + d]
        G = block @ block.T
        np.testing.assert_allclose(G - np.diag(np.diag(G)), 0, atol=1e-10)
    # chi_d norms: E||r||^2 = d over many rows.
    norms2 = (orthogonal_pool(2, 4000, d) ** 2).sum(axis=1)
    assert abs(norms2.mean() - d) < 4.5 * np.sqrt(2 * d / 4000)
    # A block depends on its own (seed, stream, block) only: growing the pool keeps it.
    np.testing.assert_allclose(orthogonal_pool(1, 2 * d, d), R[: 2 * d], rtol=0, atol=1e-12)


def test_structured_pool_is_exact_hadamard_product_and_tight():
    d, p = 12, 48  # D = 16: three full blocks
    signs = structured_signs(7, p, d)
    assert signs.shape == (3, 3, 16) and signs.dtype == np.int8
    assert set(np.unique(signs)) == {-1, 1}
    S = structured_pool(signs, p, d)
    H = hadamard(16).astype(float)
    for b in range(3):
        D1, D2, D3 = (np.diag(signs[b, i].astype(float)) for i in range(3))
        W = H @ D1 @ H @ D2 @ H @ D3 / 16.0
        assert np.array_equal(S[16 * b : 16 * (b + 1)], W[:, :d])  # exact, not approximately
    assert np.array_equal(S.T @ S, p * np.eye(d))
    assert np.array_equal(fwht(np.arange(8.0)), hadamard(8) @ np.arange(8.0))


def test_structured_pool_is_reproducible_from_the_seed_alone():
    a = structured_signs(11, 3000, 300)
    assert np.array_equal(a, structured_signs(11, 3000, 300))
    assert np.array_equal(a[:2], structured_signs(11, 1024, 300))  # block prefix stability
    assert not np.array_equal(a, structured_signs(12, 3000, 300))


def test_fwht_path_equals_gemm_path():
    assert use_fwht(784, 1024) and not use_fwht(54, 1024)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 300))
    krp = _krp("structured", n_hyperplanes=512).fit(X)
    assert krp.uses_fwht_ and krp.hyperplanes_ is None
    S = structured_pool(krp.pool_signs_, 512, 300)
    gemm = krp.__class__(**krp.get_params())
    gemm.fit(X)
    gemm.hyperplanes_ = S  # force the GEMM path on the same pool
    np.testing.assert_allclose(krp.transform(X), gemm.transform(X), rtol=1e-10, atol=1e-10)


# -- small parts, pinned (survivors of the mutation run, tests/MUTATION.md) -----------
def test_padded_size_is_the_next_power_of_two():
    assert [padded_size(d) for d in (1, 2, 3, 4, 5, 54, 784, 1024)] == [
        1, 2, 4, 4, 8, 64, 1024, 1024]


def test_use_fwht_rule_at_its_boundary():
    # ceil(p/D) * 3 D log2(D) * 16 < 2 d p: d = 192, p = 256 (D = 256) is the equality
    # case, so GEMM; one more feature tips it to FWHT.
    assert not use_fwht(192, 256)
    assert use_fwht(193, 256)
    # A partial block costs a whole one: with p = 257 the FWHT runs two blocks of D = 256.
    assert not use_fwht(200, 257)
    assert not use_fwht(1, 10**6) and not use_fwht(2, 10**6)


def test_pools_of_zero_rows():
    assert orthogonal_pool(0, 0, 5).shape == (0, 5)
    assert tight_frame_pool(0, 0, 5).shape == (0, 5)


@pytest.mark.parametrize(("p", "d"), [(40, 7), (5, 9)])
def test_tight_frame_is_the_iid_gaussian_pool_made_tight(p, d):
    G = draw_rows(4, "pool", p, lambda rng, n: rng.standard_normal((n, d)))
    # version 1: the symmetric (polar) factor by LAPACK's eigh
    if p >= d:
        w, V = np.linalg.eigh(G.T @ G / p)
        polar = G @ (V / np.sqrt(w)) @ V.T
    else:
        w, V = np.linalg.eigh(G @ G.T)
        polar = np.sqrt(d) * (V / np.sqrt(w)) @ V.T @ G
    np.testing.assert_allclose(tight_frame_pool(4, p, d, version=1), polar,
                               rtol=1e-10, atol=1e-12)
    # version 2: the QR factor with a positive diagonal, scaled (LAPACK's QR, sign-fixed)
    R2 = tight_frame_pool(4, p, d, version=2)
    q, r = np.linalg.qr(G if p >= d else G.T)
    q = q * np.sign(np.diag(r))
    expected = np.sqrt(p) * q if p >= d else np.sqrt(d) * q.T
    np.testing.assert_allclose(R2, expected, rtol=1e-10, atol=1e-12)
    gram = R2.T @ R2 if p >= d else R2 @ R2.T
    np.testing.assert_allclose(gram, max(p, d) * np.eye(min(p, d)), atol=1e-10)


def test_orthogonal_pool_versions_agree_up_to_rounding():
    # both are the QR factor with a positive diagonal: Householder (LAPACK) and the
    # compiled Gram-Schmidt differ only in the last bits
    v1, v2 = orthogonal_pool(3, 20, 8, version=1), orthogonal_pool(3, 20, 8, version=2)
    np.testing.assert_allclose(v2, v1, rtol=0, atol=1e-12)


def test_structured_pool_refuses_padded_sizes_beyond_exact_arithmetic():
    # D**3 < 2**53 keeps the materialised pool exact: D = 2**17 is the largest allowed.
    # (n_features=1 keeps the check cheap; it depends on the signs' D only.)
    assert structured_pool(structured_signs(0, 1, 2**17), 1, 1).shape == (1, 1)
    with pytest.raises(ValueError, match=r"supports n_features <= 2\*\*17, got 1\.$"):
        structured_pool(structured_signs(0, 1, 2**18), 1, 1)


def test_krp_pool_bias_value():
    assert krp_pool_bias(2.0, 3.0, 1.5, 11) == pytest.approx(-(2.0 * 3.0 + 1.5**2) / 10)


def test_structured_project_dtype_offset_and_scale():
    d, p = 12, 40
    signs = structured_signs(3, p, d)
    S = structured_pool(signs, p, d)
    X = np.arange(2 * d).reshape(2, d)  # integers are projected in float64
    Z = structured_project(X, signs, p)
    assert Z.dtype == np.float64
    np.testing.assert_allclose(Z, X @ S.T, rtol=1e-12, atol=1e-12)
    Z32 = structured_project(X.astype(np.float32), signs, p, scale=0.5)
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, 0.5 * X @ S.T, rtol=1e-5)
    out = np.zeros((5, p))  # rows [3, 5) are filled, from a CSR block
    structured_project(sp.csr_matrix(X.astype(float)), signs, p, out=out, out_row0=3)
    np.testing.assert_allclose(out[3:], X @ S.T, rtol=1e-12, atol=1e-12)
    assert not out[:3].any()


def test_structured_project_refuses_rows_outside_out():
    # The kernel runs with boundscheck=False: an out_row0 past the end of out wrote
    # past the array (a segfault or a corrupted heap), so it is refused up front.
    d, p = 12, 40
    signs = structured_signs(3, p, d)
    X = np.ones((2, d))
    out = np.zeros((5, p))
    for row0 in (4, 5, 1000, -1):
        with pytest.raises(ValueError, match=rf"out_row0 = {row0} puts the 2 rows of X "
                                             r"outside out's 5 rows: it must lie in \[0, 3\]"):
            structured_project(X, signs, p, out=out, out_row0=row0)
    with pytest.raises(ValueError, match=r"n_out = 40 must lie in \[0, 39\]"):
        structured_project(X, signs, p, out=np.zeros((5, p - 1)))
    with pytest.raises(ValueError, match=r"n_out = 80 must lie in \[0, 48\]"):
        structured_project(X, signs, 2 * p, out=np.zeros((2, 2 * p)))
    with pytest.raises(ValueError, match=r"D = 16 must be a power of two >= n_features = 17"):
        structured_project(np.ones((2, 17)), signs, p)
    with pytest.raises(ValueError, match=r"out must be a writeable 2-D float32 or float64"):
        structured_project(X, signs, p, out=np.zeros((2, p), dtype=np.int64))
    assert not out.any()  # nothing was written by a refused call
    structured_project(X, signs, p, out=out, out_row0=3)  # the last rows that fit
    assert out[3:].all() and not out[:3].any()


# -- balanced index design -------------------------------------------------------
@pytest.mark.parametrize("k, w, p", [(1000, 2, 976), (1000, 60, 976), (37, 5, 11), (3, 7, 7)])
def test_balanced_indices_use_every_row_equally_and_stay_distinct(k, w, p):
    idx = balanced_indices(5, k, w, p)
    assert idx.shape == (k, w) and idx.dtype == np.int64
    counts = np.bincount(idx.ravel(), minlength=p)
    assert counts.max() - counts.min() <= 1
    assert all(len(np.unique(row)) == w for row in idx)
    assert np.array_equal(idx, balanced_indices(5, k, w, p))


def test_balanced_indices_are_pinned_across_rounds():
    # Several rounds (permutations q = 0, 1, ...) with chunks spanning their ends: pins
    # the per-round streams and the reordering that keeps a component's indices distinct.
    assert balanced_indices(0, 10, 3, 7).tolist() == [
        [4, 6, 2], [0, 1, 3], [5, 4, 1], [2, 5, 6], [0, 3, 6], [4, 2, 1], [0, 3, 5],
        [6, 4, 3], [2, 0, 1], [5, 4, 2]]
    assert balanced_indices(2, 6, 4, 5).tolist() == [
        [2, 0, 4, 1], [3, 2, 0, 4], [3, 1, 0, 4], [3, 1, 2, 4], [1, 3, 2, 0], [2, 4, 1, 3]]


def test_balanced_indices_refuse_a_width_beyond_the_pool():
    with pytest.raises(ValueError, match=r"^width \(8\) must not exceed pool_size \(7\)\.$"):
        balanced_indices(0, 3, 8, 7)


def test_balanced_indices_overlap_less_than_random():
    k, w, p = 1000, 2, 976
    X = np.zeros((1, 8))
    rand = _krp("iid", n_components=k, n_hyperplanes=p, n_terms=1).fit(X).hyperplane_indices_
    bal = balanced_indices(0, k, w, p)

    def n_shared_pairs(idx):  # components with an index in common
        members = sp.csr_matrix((np.ones(idx.size), idx.ravel(), np.arange(0, idx.size + 1, w)),
                                shape=(k, p))
        overlap = (members @ members.T).toarray()
        return int(np.triu(overlap > 0, 1).sum())

    assert n_shared_pairs(bal) < 0.8 * n_shared_pairs(rand)


# -- the seed contract for every pool ---------------------------------------------
CONFIGS = [(pool, design) for pool in KRP_POOLS for design in ("random", "balanced")]


@pytest.mark.parametrize("d", [20, 300], ids=["gemm", "fwht"])
@pytest.mark.parametrize("pool, design", CONFIGS, ids=["-".join(c) for c in CONFIGS])
def test_krp_spec_round_trip_is_byte_identical(pool, design, d):
    X = np.random.default_rng(1).standard_normal((1100, d))
    est = _krp(pool, design).fit(X)
    rebuilt = dkrp.from_spec(est.to_spec())
    assert rebuilt.spec_checksum_ == est.spec_checksum_
    assert rebuilt.transform(X).tobytes() == est.transform(X).tobytes()


@pytest.mark.parametrize("pool", ["iid", "orthogonal", "structured"])
@pytest.mark.parametrize("d", [20, 300], ids=["gemm", "fwht"])
def test_rff_spec_round_trip_is_byte_identical(pool, d):
    X = np.random.default_rng(1).standard_normal((300, d))
    est = dkrp.RandomFourierFeatures(gamma=0.01, n_components=512, pool=pool, random_state=2)
    est.fit(X)
    assert est.uses_fwht_ == (pool == "structured" and d == 300)
    assert dkrp.from_spec(est.to_spec()).transform(X).tobytes() == est.transform(X).tobytes()


@pytest.mark.parametrize("pool", ["orthogonal", "tight_frame"])
def test_lapack_pool_checksum_mismatch_is_refused(pool):
    # Stands in for a worker whose LAPACK computes other last bits: the recorded
    # checksum no longer matches what this process computes, and it refuses.
    spec = _krp(pool).fit_n_features(10).to_spec()
    with pytest.raises(dkrp.SpecError, match="does not match its checksum"):
        dkrp.from_spec(dict(spec, checksum="f" * 64))


@pytest.mark.parametrize("pool", KRP_POOLS)
@pytest.mark.parametrize("d", [20, 300], ids=["gemm", "fwht"])
def test_float32_preserved_and_csr_equals_dense(pool, d):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, d)) * (rng.random((40, d)) < 0.2)
    est = _krp(pool).fit(X)
    Z64 = est.transform(X)
    Z32 = est.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z64, rtol=2e-3, atol=2e-3 * np.abs(Z64).max())
    np.testing.assert_allclose(est.transform(sp.csr_matrix(X)), Z64, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("pool", ["orthogonal", "structured"])
def test_rff_pool_float32_and_csr(pool):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 300)) * (rng.random((40, 300)) < 0.2)
    est = dkrp.RandomFourierFeatures(gamma=0.01, n_components=128, feature_map="cos_sin",
                                     pool=pool, random_state=0).fit(X)
    Z64 = est.transform(X)
    assert est.transform(X.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(est.transform(X.astype(np.float32)), Z64, atol=1e-4)
    np.testing.assert_allclose(est.transform(sp.csr_matrix(X)), Z64, atol=1e-12)


@parametrize_with_checks(
    [
        dkrp.PolynomialRandomProjection(n_components=20, n_hyperplanes=40, pool="structured",
                                        index_design="balanced", random_state=0),
        dkrp.PolynomialRandomProjection(n_components=20, n_hyperplanes=40, pool="tight_frame",
                                        random_state=0),
        dkrp.RandomFourierFeatures(n_components=20, pool="orthogonal", random_state=0),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    "est, match",
    [
        (_krp("hadamard"), "pool"),
        (_krp("iid", "spread"), "index_design"),
        (_krp("tight_frame", distribution="achlioptas"), "applies to pool='iid' only"),
        (dkrp.RandomFourierFeatures(kernel="laplacian", pool="structured"), "gaussian"),
        (dkrp.RandomFourierFeatures(pool="tight_frame"), "pool"),
    ],
)
def test_bad_pool_parameters(est, match):
    with pytest.raises(ValueError, match=match):
        est.fit_n_features(8)


# -- bias: O(1/p), within the documented bound --------------------------------------
@pytest.mark.parametrize("pool", ["orthogonal", "tight_frame", "structured"])
def test_krp_frame_pool_bias_is_within_the_documented_bound(pool):
    # Small p makes the O(1/p) bias large enough to see: |E<f(x),f(y)> - <x,y>^2| must
    # stay within (||x||^2||y||^2 + <x,y>^2)/(p-1) (+ sampling error), and the iid
    # pool's exact unbiasedness tests must not be applied unchanged.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 8))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X[1] = 0.8 * X[0] + 0.6 * X[1]  # one strongly correlated pair
    p, n_seeds = 16, 1500
    grams = np.array([
        (Z := _krp(pool, n_components=40, n_hyperplanes=p, n_terms=1, random_state=s)
         .fit(X).transform(X)) @ Z.T
        for s in range(n_seeds)
    ])
    K = kernel_matrix(X, kernel="homogeneous_polynomial", degree=2)
    sq = np.diag(X @ X.T)
    bound = np.abs(krp_pool_bias(sq[:, None], sq[None, :], X @ X.T, p))
    se = grams.std(axis=0, ddof=1) / np.sqrt(n_seeds)
    bias = grams.mean(axis=0) - K
    excess = np.abs(bias) - bound - Z_BAND * se
    assert excess.max() <= 0, f"{pool}: bias {bias.round(4)} vs bound {bound.round(4)}"
    # ... and the bias is real (negative on the diagonal, where it is largest), so
    # unbiasedness would indeed be the wrong test.
    assert (np.diag(bias) < 0).all(), np.diag(bias)


# -- random Fourier features: lower variance at equal D -----------------------------
def test_rff_orthogonal_and_structured_have_lower_kernel_error():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 32))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    gamma = 1.0
    errors = {}
    for pool in ("iid", "orthogonal", "structured"):
        errors[pool] = np.mean([
            kernel_approximation_error(
                X,
                dkrp.RandomFourierFeatures(gamma=gamma, n_components=128, feature_map="cos_sin",
                                           pool=pool, random_state=s).fit(X).transform(X),
                kernel="gaussian", gamma=gamma,
            ).mse
            for s in range(60)
        ])
    assert errors["orthogonal"] < 0.85 * errors["iid"], errors
    assert errors["structured"] < 0.85 * errors["iid"], errors


# -- the MNIST targets ---------------------------------------------------------
@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize(
    "pool, p, limit",
    [
        ("tight_frame", 976, 0.040),
        ("structured", 1024, 0.040),
        ("orthogonal", 784, 0.040),
        # p = 976 = 784 + 192: the partial block of 192 orthogonal directions makes
        # S^T S anisotropic (784 I + 784 P_192), so the pool is no tight frame. The
        # issue's target is 0.040; a target not met is reported, not moved.
        pytest.param("orthogonal", 976, 0.040, marks=pytest.mark.xfail(
            strict=True, reason="target 0.040 not met: measured 0.0403 (seeds 0-4: 0.0457, "
            "0.0384, 0.0397, 0.0393, 0.0384)")),
    ],
)
def test_mnist_distortion_of_frame_pools(mnist_test_500, pool, p, limit):
    X = mnist_test_500
    values = [
        float(distance_distortion(
            X,
            dkrp.PolynomialRandomProjection(degree=2, n_components=1000, n_hyperplanes=p,
                                            n_terms=30, pool=pool, random_state=seed)
            .fit(X).transform(X),
            degree=2,
        ))
        for seed in range(5)
    ]
    assert np.mean(values) <= limit, f"{pool}: mean {np.mean(values):.4f}, per seed {values}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d, n_out, n_rows", [(1, 3, 5), (3, 4, 33), (6, 8, 40), (54, 100, 7),
                                              (784, 1024, 70), (700, 1500, 37)])
def test_tiled_fwht_is_bit_identical_to_the_one_row_transform(dtype, d, n_out, n_rows):
    from dkrp.features._fwht import _sorf_project, _sorf_project_tiled

    rng = np.random.default_rng(d)
    X = rng.standard_normal((n_rows, d)).astype(dtype)
    signs = np.ascontiguousarray(structured_signs(d, n_out, d), dtype=dtype)
    scale = dtype(1.0 / signs.shape[2])
    a = np.full((n_rows + 2, n_out), -7, dtype=dtype)
    b = a.copy()
    _sorf_project(X, signs, np.int64(n_out), scale, a, np.int64(1))
    _sorf_project_tiled(X, signs, np.int64(n_out), scale, b, np.int64(1))
    assert a.tobytes() == b.tobytes()
