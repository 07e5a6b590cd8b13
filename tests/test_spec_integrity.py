"""A hand-edited or corrupted spec is refused, never silently half-applied (issue 10, case 5)."""

import json

import numpy as np
import pytest

import dkrp
from dkrp import SpecError


@pytest.fixture
def X():
    return np.random.default_rng(0).standard_normal((20, 5))


def _edited(spec, path, value):
    spec = json.loads(json.dumps(spec))
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return spec


def test_edited_random_state_is_refused(X):
    spec = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16,
                                           random_state=3).fit(X).to_spec()
    with pytest.raises(SpecError, match=r"params.random_state is 4 but seed is 3.*edited"):
        dkrp.from_spec(_edited(spec, ("params", "random_state"), 4))


def test_edited_gamma_is_refused(X):
    spec = dkrp.RandomFourierFeatures(n_components=8, gamma=0.5, random_state=0).fit(X).to_spec()
    with pytest.raises(SpecError, match=r"gamma_=2.0 but its fitted values say 0.5"):
        dkrp.from_spec(_edited(spec, ("params", "gamma"), 2.0))
    # the fitted value alone edited: its hyperplanes no longer match the checksum
    with pytest.raises(SpecError, match="disagrees with itself|edited or corrupted"):
        dkrp.from_spec(_edited(spec, ("fitted", "gamma_"), 2.0))


def test_gamma_scale_spec_keeps_its_learnt_width(X):
    rff = dkrp.RandomFourierFeatures(n_components=8, gamma="scale", random_state=0).fit(X)
    same = dkrp.from_spec(rff.to_spec())
    assert same.gamma_ == rff.gamma_
    assert same.transform(X).tobytes() == rff.transform(X).tobytes()


def test_checksum_mismatch_with_same_versions_blames_the_spec(X):
    spec = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16,
                                           random_state=3).fit(X).to_spec()
    edited = _edited(spec, ("params", "n_hyperplanes"), 17)
    with pytest.raises(SpecError, match="edited or corrupted") as info:
        dkrp.from_spec(edited)
    assert "Pin the same" not in str(info.value)
    # another numpy version recorded: the message points at versions instead (the
    # checksum alone differs: params_checksum does not cover it)
    other = _edited(_edited(spec, ("checksum",), "0" * 64), ("versions", "numpy"), "0.0.0")
    with pytest.raises(SpecError, match="Pin the same"):
        dkrp.from_spec(other)


def test_an_edit_is_blamed_on_the_edit_whatever_wrote_the_spec(X):
    """Issue 31 (6): an edited spec recorded with other versions read as "pin the same
    versions", though its params_checksum says it was edited."""
    spec = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16,
                                           random_state=3).fit(X).to_spec()
    edited = _edited(_edited(spec, ("params", "n_hyperplanes"), 17), ("versions", "numpy"),
                     "0.0.0")
    with pytest.raises(SpecError, match="disagrees with itself.*params_checksum") as info:
        dkrp.from_spec(edited)
    assert "Pin the same" not in str(info.value)


def _checksum_refused(spec, dkrp_version):
    spec = _edited(_edited(spec, ("checksum",), "0" * 64), ("versions", "dkrp"), dkrp_version)
    with pytest.raises(SpecError, match="does not match its checksum") as info:
        dkrp.from_spec(spec)
    return str(info.value)


def test_a_spec_of_an_older_dkrp_is_not_blamed_on_the_version(X):
    """Issue 31 (6): a dkrp rebuilds the specs of its earlier releases bit for bit (old
    draws stay behind legacy_fitted_values), so once the version moves, a spec of an
    older release that fails its checksum was edited or corrupted, not written by a dkrp
    whose draws differ."""
    spec = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16,
                                           random_state=3).fit(X).to_spec()
    message = _checksum_refused(spec, "0.0.1")
    assert "Pin the same" not in message
    assert (f"with the same numpy ({np.__version__}) that wrote it and dkrp "
            f"{dkrp.__version__}, which rebuilds the specs of dkrp 0.0.1 bit for bit: the "
            "spec was edited or corrupted") in message
    # a newer dkrp may draw what this one does not know, as an unreadable version may
    for version in ("999.0", "nightly", None):
        assert "Pin the same versions" in _checksum_refused(spec, version), version


@pytest.mark.parametrize("path, value", [(("params",), {"no_such": 1}),
                                         (("seed",), "x"), (("n_features_in",), None)])
def test_malformed_fields_give_spec_errors(X, path, value):
    spec = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16,
                                           random_state=3).fit(X).to_spec()
    with pytest.raises(SpecError, match="Malformed"):
        dkrp.from_spec(_edited(spec, path, value))


def test_edited_saved_file_is_refused(tmp_path, X):
    est = dkrp.RandomFourierFeatures(n_components=8, gamma=0.5, random_state=0).fit(X)
    path = est.save(tmp_path / "rff.json")
    spec = json.loads(path.read_text())
    spec["params"]["gamma"] = 1.5
    path.write_text(json.dumps(spec))
    with pytest.raises(SpecError, match="edited or corrupted"):
        dkrp.load(path)


def _data_dependent_maps():
    from dkrp.baselines import KulisGraumanRP, Nystroem, PCAProjector
    from dkrp.features.maclaurin import RandomMaclaurin

    return {
        "nystroem": (lambda: Nystroem(kernel="gaussian", gamma=0.1, n_components=8,
                                      random_state=0), {"gamma": 0.7, "kernel": "laplacian"}),
        "kg-rp": (lambda: KulisGraumanRP(kernel="polynomial", degree=2, n_components=4,
                                         n_landmarks=10, n_terms=3, random_state=0),
                  {"kernel": "gaussian", "degree": 3}),
        "pca": (lambda: PCAProjector(n_components=3, random_state=0), {"whiten": True}),
        "maclaurin": (lambda: RandomMaclaurin(kernel="exponential", gamma=0.3, n_components=8,
                                              random_state=0), {"gamma": 0.9}),
        "maclaurin-poly": (lambda: RandomMaclaurin(kernel="polynomial", degree=2, coef0=1.0,
                                                   n_components=8, random_state=0),
                           {"coef0": 3.0}),
    }


@pytest.mark.parametrize(("name", "param"), [
    (name, param) for name, (_, edits) in _data_dependent_maps().items() for param in edits])
def test_edited_parameters_that_the_state_checksum_misses_are_refused(X, name, param):
    """Issue 28 (3): these edits rebuild the same state arrays (learnt, or not drawn from
    the parameter), so the state checksum passed them and the map changed in silence."""
    make, edits = _data_dependent_maps()[name]
    est = make().fit(X)
    spec = est.to_spec()
    edited = _edited(spec, ("params", param), edits[param])
    with pytest.raises(SpecError, match=r"disagrees with itself.*params_checksum.*instead of "
                                        "editing a spec"):
        dkrp.from_spec(edited)
    # the unedited spec rebuilds the same map
    again = dkrp.from_spec(spec)
    assert again.transform(X).tobytes() == est.transform(X).tobytes()


def test_a_spec_without_params_checksum_loads_as_before(X):
    # specs written before the field existed (tests/fixtures/v0_1_0) carry none
    spec = dkrp.RandomFourierFeatures(n_components=8, random_state=0).fit(X).to_spec()
    del spec["params_checksum"]
    assert dkrp.from_spec(spec).to_spec()["checksum"] == spec["checksum"]


def test_a_checksum_refused_on_another_kind_of_machine_says_so():
    """Issue 28 (2): a spec of draw version 1 (LAPACK's tight frame) from a machine with
    another BLAS kernel was refused as "edited or corrupted"."""
    from dkrp._spec import machine

    spec = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=30, pool="tight_frame",
                                           random_state=0).fit_n_features(6).to_spec()
    del spec["fitted"]["draw_version_"], spec["params_checksum"]  # as written before
    spec["checksum"] = "0" * 64  # what LAPACK computed there
    there = "openblas Haswell" if machine()["blas"] == "openblas SkylakeX" else "openblas SkylakeX"
    spec["versions"] = {**spec["versions"], "blas": there}
    with pytest.raises(SpecError) as info:
        dkrp.from_spec(spec)
    message = str(info.value)
    assert f"blas {there!r} there, {machine()['blas']!r} here" in message
    assert "fit the map again" in message and "edited" not in message
    spec["versions"] = {**spec["versions"], **machine()}  # the same machine: edited
    with pytest.raises(SpecError, match="edited or corrupted"):
        dkrp.from_spec(spec)


def test_an_edited_fitted_value_that_the_state_checksum_misses_is_refused(X):
    # the cosine version changes float32 features' last bits, not the hyperplanes
    spec = dkrp.RandomFourierFeatures(n_components=8, random_state=0).fit(X).to_spec()
    assert spec["fitted"]["cosine_"] == "dkrp2"
    with pytest.raises(SpecError, match="disagrees with itself.*params_checksum"):
        dkrp.from_spec(_edited(spec, ("fitted", "cosine_"), "dkrp"))
