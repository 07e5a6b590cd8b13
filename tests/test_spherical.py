"""Spherical Random Features (issue 12): surrogate fit, unbiasedness, specs, CLI."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate
from scipy import special as sc

import dkrp
from dkrp._spec import rebuild
from dkrp.features import _srf_fit
from dkrp.testing import assert_unbiased
from dkrp.testing.statistics import estimates_over_seeds

REPO_ROOT = Path(__file__).resolve().parents[1]

#: The issue's achievable max |K_hat - K| on [0, 2] for a = 4, N = 10 (a limit of any
#: non-negative radial density); "done" is within 10% of it.
FLOORS = {3: 1.6e-2, 7: 1.6e-2, 10: 1.2e-2, 20: 5e-3}


def _quadrature_cf(nu, t):
    """Omega_d(t) = E cos(t s), s the first coordinate of a uniform unit vector."""
    log_b = sc.betaln(0.5, nu + 0.5)

    def density(s):
        return (1.0 - s * s) ** (nu - 0.5) * np.exp(-log_b)

    lim = min(1.0, 40.0 / np.sqrt(2 * nu + 2))
    return integrate.quad(density, -lim, lim, weight="cos", wvar=t, limit=2000,
                          epsabs=1e-14)[0]


@pytest.mark.parametrize("nu", [1.5, 7.0, 31.0, 127.0, 511.0])
def test_sphere_cf_matches_quadrature(nu):
    # the three regimes (series, jv, Debye) against the defining integral
    for t in [0.5, 3.0, 10.0, 40.0, 100.0, 200.0, 400.0]:
        assert _srf_fit.sphere_cf(nu, np.array([t]))[0] == pytest.approx(
            _quadrature_cf(nu, t), abs=1e-11), (nu, t)


def test_omega_table_is_the_hermite_formula_bit_for_bit():
    # the compiled interpolation must keep the bits of the numpy expression it replaced:
    # fitted surrogates (and so the radii of every new SRF spec) are built from it
    nu = 127.0
    rng = np.random.default_rng(0)
    t = np.concatenate([rng.uniform(0.0, 300.0, (50, 40)).ravel(), [0.0, 0.05, 299.99]])
    step = _srf_fit.OMEGA_STEP
    n = int(np.ceil(t.max() / step)) + 2
    grid = np.arange(n) * step
    y = _srf_fit.sphere_cf(nu, grid)
    m = -grid * _srf_fit.sphere_cf(nu + 1.0, grid) / (2.0 * (nu + 1.0)) * step
    pos = t / step
    i = np.minimum(pos.astype(np.int64), n - 2)
    u = pos - i
    u2 = u * u
    u3 = u2 * u
    expected = ((2 * u3 - 3 * u2 + 1) * y[i] + (u3 - 2 * u2 + u) * m[i]
                + (3 * u2 - 2 * u3) * y[i + 1] + (u3 - u2) * m[i + 1])
    got = _srf_fit.omega_table(nu, t.reshape(-1, 1))
    assert got.shape == (t.size, 1)
    assert got.ravel().tobytes() == expected.tobytes()


def test_sphere_cf_large_dimension_no_underflow():
    # d = 4096: jv and ive both underflow at t = 400, Omega (about 3e-9) does not
    assert sc.jv(2047.0, 400.0) == 0.0 and sc.ive(2047.0, 400.0) == 0.0
    value = _srf_fit.sphere_cf(2047.0, np.array([400.0]))[0]
    assert value == pytest.approx(_quadrature_cf(2047.0, 400.0), rel=1e-6)
    assert _srf_fit.sphere_cf(-0.5, np.array([3.0]))[0] == pytest.approx(np.cos(3.0), abs=1e-14)


@pytest.mark.parametrize("d", [16, 256])
@pytest.mark.parametrize("degree", sorted(FLOORS))
def test_surrogate_reaches_the_floor_on_0_2(d, degree):
    fit = _srf_fit.fit_surrogate(d, degree, 4.0, 10)
    z = np.linspace(0.0, 2.0, 1001)
    khat = _srf_fit.surrogate_kernel(z, fit.sigma, fit.coef, d, degree, 4.0)
    err = np.abs(khat - (1 - z**2 / 16.0) ** degree).max()
    assert np.all(np.isfinite(khat))
    assert err <= 1.1 * FLOORS[degree], err
    assert khat[0] == pytest.approx(fit.mass, rel=1e-12)


def _sphere_points(n, d, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d))
    X[1] = X[0] + 0.3 * X[1] / np.linalg.norm(X[1]) * np.linalg.norm(X[0])  # a close pair
    X[2] = -X[0] + 0.2 * X[2]  # a nearly antipodal pair (z close to 2)
    return X


def _distances(X):
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    return np.sqrt(np.maximum(((Xn[:, None] - Xn[None]) ** 2).sum(-1), 0.0))


@pytest.mark.parametrize("feature_map", ["cos", "cos_sin"])
def test_unbiased_for_the_fitted_surrogate(feature_map):
    X = _sphere_points(8, 16)
    make = lambda seed: dkrp.SphericalRandomFeatures(  # noqa: E731
        degree=7, scale=4.0, n_components=64, feature_map=feature_map, random_state=seed)
    grams, _ = estimates_over_seeds(make, X, 400)
    z = _distances(X)
    khat = make(0).fit(X).surrogate_kernel(z.ravel()).reshape(z.shape)
    iu = np.triu_indices(len(X))
    assert_unbiased(grams[:, iu[0], iu[1]], khat[iu], "SRF <z(x), z(y)> vs K_hat")
    # and K_hat is the polynomial kernel up to the fit's floor
    exact = (1 - z**2 / 16.0) ** 7
    assert np.abs(khat - exact).max() <= 1.1 * FLOORS[7]


_DIGEST = """
import hashlib, numpy as np, dkrp
X = np.random.default_rng(3).standard_normal((40, 64))
est = dkrp.SphericalRandomFeatures(degree=10, scale=3.0, n_components=96, random_state=5).fit(X)
s = est.surrogate_
h = hashlib.sha256(np.asarray(s["sigma"] + s["coef"]).tobytes())
h.update(est.transform(X).tobytes())
print(h.hexdigest())
"""


def _output_of_a_fresh_process(code):
    """What ``code`` prints, run in a fresh interpreter that imports this checkout.

    The tests compare it with this process's own result: two processes, one of them
    fresh (a second fresh one cost each test another fit, up to 18 s at d = 16, p = 20).
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, check=True).stdout.strip()


def test_same_surrogate_and_features_in_two_processes():
    digest = _output_of_a_fresh_process(_DIGEST)
    assert len(digest) == 64
    # and this process agrees (the surrogate fit is not seeded by anything external)
    X = np.random.default_rng(3).standard_normal((40, 64))
    est = dkrp.SphericalRandomFeatures(degree=10, scale=3.0, n_components=96,
                                       random_state=5).fit(X)
    s = est.surrogate_
    h = hashlib.sha256(np.asarray(s["sigma"] + s["coef"]).tobytes())
    h.update(est.transform(X).tobytes())
    assert h.hexdigest() == digest


def test_spec_round_trip_is_byte_identical_and_does_not_refit(monkeypatch):
    X = np.random.default_rng(4).standard_normal((30, 12))
    est = dkrp.SphericalRandomFeatures(degree=10, n_components=50, feature_map="cos_sin",
                                       random_state=2).fit(X)
    spec = est.to_spec()
    assert spec["fitted"]["surrogate_"]["sigma"] == est.surrogate_["sigma"]

    def no_refit(*args, **kwargs):
        raise AssertionError("a rebuilt SRF must take its surrogate from the spec")

    monkeypatch.setattr(_srf_fit, "fit_surrogate", no_refit)
    again = dkrp.from_spec(spec)
    assert again.transform(X).tobytes() == est.transform(X).tobytes()
    assert again.transform(X.astype(np.float32)).tobytes() == \
        est.transform(X.astype(np.float32)).tobytes()


def test_refit_on_other_dimension_refits_the_surrogate():
    est = dkrp.SphericalRandomFeatures(n_components=10, random_state=0)
    est.fit(np.ones((3, 16)))
    first = est.surrogate_
    est.fit(np.ones((3, 32)))
    assert est.surrogate_["n_features"] == 32 and est.surrogate_["sigma"] != first["sigma"]


@pytest.mark.parametrize(
    ("params", "message"),
    [({"scale": 1.5}, "scale"), ({"degree": 0}, "degree"), ({"n_components": 0},
                                                             "n_components"),
     ({"n_terms": 0}, "n_terms"), ({"feature_map": "cos_sin", "n_components": 7}, "even")],
)
def test_bad_parameters_are_clear_errors(params, message):
    with pytest.raises(ValueError, match=message):
        dkrp.SphericalRandomFeatures(**params).fit(np.ones((2, 4)))


def test_zero_row_is_named():
    X = np.random.default_rng(0).standard_normal((6, 5))
    est = dkrp.SphericalRandomFeatures(n_components=8, random_state=0).fit(X)
    X[4] = 0.0
    with pytest.raises(ValueError, match="row 4 is all zeros"):
        est.transform(X)
    with pytest.raises(ValueError, match="row 4 is all zeros"):
        est.transform(sp.csr_matrix(X))


def test_csr_equals_dense_and_rows_are_normalised():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 30)) * (rng.random((40, 30)) < 0.3)
    X[:, 0] += 1.0  # no zero rows
    est = dkrp.SphericalRandomFeatures(degree=3, n_components=40, random_state=0).fit(X)
    Z = est.transform(X)
    np.testing.assert_allclose(est.transform(sp.csr_matrix(X)), Z, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.transform(5.0 * X), Z, rtol=1e-10, atol=1e-12)


def test_methods_registry_and_make_projector():
    from dkrp.methods import make_projector

    est = make_projector("srf", degree=5, scale=3.0, n_components=20, random_state=1)
    assert isinstance(est, dkrp.SphericalRandomFeatures) and est.scale == 3.0
    with pytest.raises(ValueError, match="does not take gamma;"):
        make_projector("srf", gamma=1.0)


@pytest.mark.cluster
def test_cli_featurize_srf_on_embedded_cluster_is_byte_identical(tmp_path):
    from click.testing import CliRunner

    from dkrp.cli import main
    from dkrp.feature_store import open_features

    X = np.random.default_rng(7).standard_normal((1200, 10))
    np.save(tmp_path / "x.npy", X)
    runner = CliRunner()
    r = runner.invoke(main, ["ingest", str(tmp_path / "x.npy"), str(tmp_path / "x.zarr"),
                             "--chunk-rows", "400"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["featurize", str(tmp_path / "x.zarr"), str(tmp_path / "f.zarr"),
                             "--method", "srf", "--degree", "10", "--scale", "3",
                             "--n-components", "64", "--seed", "3", "-q"],
                      catch_exceptions=False)
    assert r.exit_code == 0, r.output
    fs = open_features(tmp_path / "f.zarr")
    est = dkrp.SphericalRandomFeatures(degree=10, scale=3.0, n_components=64,
                                       random_state=3).fit(X)
    Z = fs.Z.compute()
    assert np.array_equal(Z, np.vstack([est.transform(X[s:s + 400])
                                        for s in range(0, 1200, 400)]))
    assert fs.spec["fitted"]["surrogate_"]["sigma"] == est.surrogate_["sigma"]
    r = runner.invoke(main, ["featurize", str(tmp_path / "x.zarr"), str(tmp_path / "g.zarr"),
                             "--method", "srf", "--scale", "1.5", "-q"])
    assert r.exit_code != 0 and "scale" in r.output, r.output


@functools.lru_cache(maxsize=None)
def _fit(d, degree, scale, version):
    """``fit_surrogate(d, degree, scale, 10, version=version)``, computed once per process.

    The sweeps below ask for the same fits again (the floor cases, the version
    comparisons and the two-process checks share corners: a version-4 fit at d = 16,
    p = 20 is 20 s on 2 cores). A fit is a deterministic function of its arguments (the
    two-process tests check that across processes), so sharing the one result changes
    nothing any test asserts; the objects are frozen dataclasses.
    """
    return _srf_fit.fit_surrogate(d, degree, scale, 10, version=version)


@functools.lru_cache(maxsize=None)
def _floor(d, degree, scale):
    """``l2_floor(d, degree, scale)``, computed once per process (as :func:`_fit`)."""
    return _srf_fit.l2_floor(d, degree, scale)


def _sampled_objective(fit, d, degree, scale):
    """1/2 int_0^2 (K - K_hat)^2 at the fit's Simpson nodes, K_hat the kernel the features
    estimate (the sampler's grid), not whatever grid the fitter used internally."""
    z, omega = _srf_fit._simpson(_srf_fit.N_Z)
    e = (_srf_fit.surrogate_kernel(z, fit.sigma, fit.coef, d, degree, scale)
         - _srf_fit.polynomial_kernel(z, degree, scale))
    return 0.5 * float(omega @ (e * e))


_FLOOR_CASES = [(d, p, 4.0) for d in (64, 256, 1024) for p in (3, 10)] + [
    (d, p, 4.0) for d in (16, 32, 64) for p in (7, 20)] + [(4096, 20, 4.0)] + [
    # version 2's other corners over 1.10 (benchmarks/RESULTS.md, bench_srf_fit), which
    # version 3's shell starts bring within SHELL_STOP (5 %) of the grid floor
    (16, 7, 2.0), (16, 7, 3.0), (16, 10, 2.0), (16, 10, 3.0), (16, 10, 4.0), (32, 10, 2.0),
    (32, 10, 3.0), (32, 10, 4.0), (32, 20, 2.0), (32, 20, 3.0), (64, 20, 2.0), (64, 20, 3.0),
    # version 3's last corners (3.4x, 20.9x, 12.3x: at d = 16, p = 20 the floor sits on
    # thin shells, r = 4.30, 5.79, 7.17 at a = 4, and L-BFGS stalls in the narrow valleys
    # of the shell starts), which version 4's Gauss-Newton brings within SHELL_STOP
    (16, 20, 2.0), (16, 20, 3.0)]


@pytest.mark.slow
@pytest.mark.parametrize(("d", "degree", "scale"), _FLOOR_CASES)
def test_fit_is_within_ten_percent_of_the_floor_of_every_radial_density(d, degree, scale):
    """Issue 12: the fitter reaches within 10 % of the floor. The floor is computed, not
    quoted: the best L2 objective over *all* non-negative radial densities (a convex NNLS
    over sphere shells, ``l2_floor``); the paper's clipped Gaussian mixture is one of
    them, so the fit can only be at or above it (2 % slack for the radius grid). The
    objective is that of the kernel the features estimate, and it is the one the fitter
    reports (fitter version 1 reported its coarse grid's, up to 1.9x lower at d = 16)."""
    fit = _fit(d, degree, scale, _srf_fit.FIT_VERSION)
    floor = _floor(d, degree, scale)
    sampled = _sampled_objective(fit, d, degree, scale)
    assert np.all(np.isfinite(fit.sigma + fit.coef)) and np.isfinite(fit.max_error)
    assert fit.objective == pytest.approx(sampled, rel=1e-9)
    assert 0.98 * floor.objective <= sampled <= 1.10 * floor.objective, (
        sampled / floor.objective)


@pytest.mark.slow  # a fitter-version sweep: the full suite
def test_new_fits_record_the_fitter_version_and_old_specs_keep_their_surrogate(monkeypatch):
    X = np.random.default_rng(4).standard_normal((20, 12))
    est = dkrp.SphericalRandomFeatures(degree=7, n_components=40, random_state=1).fit(X)
    assert est.surrogate_["fit_version"] == _srf_fit.FIT_VERSION == 4
    # an estimator as dkrp wrote it before version 2: a version-1 surrogate, no fit_version
    old = _srf_fit.fit_surrogate(12, 7, 4.0, 10, version=1)
    assert old.sigma != tuple(est.surrogate_["sigma"])  # the two procedures differ here
    spec = est.to_spec()
    del spec["params_checksum"], spec["fitted"]["draw_version_"]  # neither existed then
    spec["fitted"]["surrogate_"] = {
        "n_features": 12, "degree": 7, "scale": 4.0, "n_terms": 10, "sigma": list(old.sigma),
        "coef": list(old.coef), "mass": old.mass, "max_error": old.max_error,
        "objective": old.objective}
    legacy = rebuild(spec, verify=False)  # its checksum, as the old dkrp wrote it
    spec["checksum"] = legacy.spec_checksum_

    def no_refit(*args, **kwargs):
        raise AssertionError("a rebuilt SRF must take its surrogate from the spec")

    monkeypatch.setattr(_srf_fit, "fit_surrogate", no_refit)
    again = dkrp.from_spec(spec)
    assert again.surrogate_["sigma"] == list(old.sigma)
    assert "fit_version" not in again.surrogate_
    assert again.transform(X).tobytes() == legacy.transform(X).tobytes()
    assert again.transform(X).tobytes() != est.transform(X).tobytes()


@pytest.mark.slow  # a fitter-version sweep: the full suite
def test_surrogate_cache_keeps_fitter_versions_apart():
    from dkrp.features.spherical import _fit_surrogate_cached

    v1 = _fit_surrogate_cached(12, 7, 4.0, 10, 1)
    v2 = _fit_surrogate_cached(12, 7, 4.0, 10, 2)
    v3 = _fit_surrogate_cached(12, 7, 4.0, 10, 3)
    v4 = _fit_surrogate_cached(12, 7, 4.0, 10, 4)
    assert (v1.version, v2.version, v3.version, v4.version) == (1, 2, 3, 4)
    assert len({v1.sigma, v2.sigma, v3.sigma}) == 3
    assert v1 == _srf_fit.fit_surrogate(12, 7, 4.0, 10, version=1)
    assert v2 == _srf_fit.fit_surrogate(12, 7, 4.0, 10, version=2)


@pytest.mark.slow  # a fitter-version sweep: the full suite
@pytest.mark.parametrize(("d", "degree", "scale"), [(20, 3, 4.0), (128, 20, 2.0),
                                                    (256, 10, 3.0)])
def test_version_3_is_version_2_bit_for_bit_where_version_2_meets_the_target(d, degree,
                                                                               scale):
    # the shell starts open only for d < SHELL_MAX_D and a version-2 fit over SHELL_GATE
    # times the grid floor: everywhere else (USPS, d = 256; the golden values' d = 20,
    # p = 3) a new spec's surrogate, hence its radii, is version 2's
    v2 = _fit(d, degree, scale, 2)
    v3 = _fit(d, degree, scale, 3)
    assert (v3.sigma, v3.coef, v3.objective, v3.mass) == (v2.sigma, v2.coef, v2.objective,
                                                          v2.mass)
    assert v3.version == 3 and v3.restarts == v2.restarts


@pytest.mark.slow  # a fitter-version sweep: the full suite
@pytest.mark.parametrize(("d", "degree", "scale", "version", "stall"), [
    # d = 16, p = 7, a = 4: version 2 ends 2.5x above the floor on one machine, 1.97x on
    # another (one Gaussian cannot follow its single thin shell at r = 3.77; where
    # L-BFGS stops depends on the BLAS's rounding); version 3's shell starts come within
    # SHELL_STOP of the grid floor, which is within 1 % of l2_floor's (finer radii)
    (16, 7, 4.0, 3, 1.5),
    # d = 16, p = 20, a = 4: version 3's best shell start ends 12x above the floor (L-BFGS
    # stalls in the shell starts' narrow valleys); Gauss-Newton from the same starts
    # comes within SHELL_STOP of the grid floor
    (16, 20, 4.0, 4, 10.0),
])
def test_a_version_reaches_the_floor_where_the_one_before_stalled(d, degree, scale, version,
                                                                   stall):
    old = _fit(d, degree, scale, version - 1)
    new = _fit(d, degree, scale, version)
    floor = _floor(d, degree, scale).objective
    assert old.objective > stall * floor
    assert new.objective <= _srf_fit.SHELL_STOP * 1.01 * floor
    assert new.restarts > old.restarts
    assert new.objective == pytest.approx(_sampled_objective(new, d, degree, scale), rel=1e-9)


def test_unknown_fitter_version_is_a_clear_error():
    with pytest.raises(ValueError, match="use 1, 2, 3 or 4"):
        _srf_fit.fit_surrogate(16, 3, 4.0, 10, version=5)


@pytest.mark.slow  # a fitter-version sweep: the full suite
@pytest.mark.parametrize(("d", "degree", "scale"), [(20, 3, 4.0), (16, 7, 4.0), (32, 20, 2.0),
                                                    (128, 20, 2.0), (256, 10, 3.0)])
def test_version_4_is_version_3_bit_for_bit_where_version_3_meets_the_target(d, degree,
                                                                               scale):
    # Gauss-Newton runs only where version 3's fit is still over SHELL_GATE times the grid
    # floor: everywhere else (d >= 128, USPS's d = 256, the golden values' d = 20, and the
    # corners version 3's L-BFGS shell starts solved, d = 16, p = 7 and d = 32, p = 20) a
    # new spec's surrogate, hence its radii, is version 3's
    v3 = _fit(d, degree, scale, 3)
    v4 = _fit(d, degree, scale, 4)
    assert (v4.sigma, v4.coef, v4.objective, v4.mass, v4.max_error) == (
        v3.sigma, v3.coef, v3.objective, v3.mass, v3.max_error)
    assert v4.version == 4 and v4.restarts == v3.restarts


_FIT_DIGEST = """
import hashlib, numpy as np
from dkrp.features import _srf_fit
fit = _srf_fit.fit_surrogate({d}, {degree}, {scale}, 10, version={version})
print(fit.restarts, hashlib.sha256(np.asarray(fit.sigma + fit.coef).tobytes()).hexdigest())
"""


@pytest.mark.parametrize(("d", "degree", "scale", "version"), [
    (16, 7, 4.0, 3),   # version 3's shell starts (NNLS, least squares, L-BFGS)
    (16, 20, 4.0, 4),  # version 4's Gauss-Newton (a trust region, SVDs on one BLAS thread)
])
def test_extra_fit_steps_are_the_same_in_two_processes(d, degree, scale, version):
    # part of the seed contract: the same (d, p, a, N) gives the same surrogate bit for
    # bit anywhere
    digest = _output_of_a_fresh_process(
        _FIT_DIGEST.format(d=d, degree=degree, scale=scale, version=version))
    fit = _fit(d, degree, scale, version)
    before = _fit(d, degree, scale, version - 1)
    assert fit.restarts > before.restarts  # the version's own step ran
    assert digest == f"{fit.restarts} " + hashlib.sha256(
        np.asarray(fit.sigma + fit.coef).tobytes()).hexdigest()


def test_a_spec_written_on_another_machine_rebuilds_here_with_its_surrogate(monkeypatch):
    """Issue 28 (2): a fit has BLAS in its loop, so another machine may fit another
    surrogate; the spec carries it, and its radii (draw version 2) are the same bits on
    every machine, so the spec's checksum verifies here (tests/fixtures/golden)."""
    import json
    from pathlib import Path

    spec = json.loads((Path(__file__).parent / "fixtures" / "golden" /
                       "srf_elsewhere.spec.json").read_text())

    def no_refit(*args, **kwargs):
        raise AssertionError("a rebuilt SRF must take its surrogate from the spec")

    monkeypatch.setattr(_srf_fit, "fit_surrogate", no_refit)
    est = dkrp.from_spec(spec)  # verifies the checksum
    assert est.draw_version_ == 2
    assert est.surrogate_["sigma"][0] == spec["fitted"]["surrogate_"]["sigma"][0]
    here = dkrp.SphericalRandomFeatures(degree=3, scale=4.0, n_components=600,
                                        random_state=2018)
    assert est.get_params() == here.get_params()  # same parameters, another surrogate
