"""dkrp._spec: to_spec / from_spec, save / load, checksums and malformed specs."""

import json

import numpy as np
import pytest
from projector_cases import BASELINE_MAPS, DATA_DEPENDENT, PROJECTORS

import dkrp
from dkrp.base import from_spec, load
from dkrp.features.polynomial import ROW_BLOCK

IDS = ["krp", "krp-achlioptas", "rff", "explicit"]


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(5).standard_normal((3 * ROW_BLOCK + 77, 12))


@pytest.mark.parametrize("make", PROJECTORS, ids=IDS)
def test_spec_round_trip_is_byte_identical(make, X):
    est = make().fit(X)
    spec = json.loads(json.dumps(est.to_spec()))
    again = dkrp.from_spec(spec)
    assert again.spec_checksum_ == est.spec_checksum_
    assert est.transform(X).tobytes() == again.transform(X).tobytes()
    assert est.transform(X.astype(np.float32)).tobytes() == again.transform(
        X.astype(np.float32)).tobytes()


def test_checksum_mismatch_is_refused(X):
    spec = PROJECTORS[0]().fit(X).to_spec()
    tampered = dict(spec, checksum="0" * 64)
    with pytest.raises(dkrp.SpecError, match="does not match its checksum"):
        dkrp.from_spec(tampered)
    # A different generator state (here: another seed under the old checksum) is caught too.
    other = dict(spec, seed=spec["seed"] + 1, params=dict(spec["params"], random_state=12))
    with pytest.raises(dkrp.SpecError, match="numpy"):
        dkrp.from_spec(other)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda s: dict(s, format="other"), "Not a dkrp projector spec"),
        (lambda s: dict(s, format_version=99), "format_version"),
        (lambda s: dict(s, **{"class": "NoSuchProjector"}), "Unknown projector class"),
    ],
)
def test_malformed_specs_are_refused(mutate, match, X):
    spec = PROJECTORS[0]().fit(X).to_spec()
    with pytest.raises(dkrp.SpecError, match=match):
        dkrp.from_spec(mutate(spec))


def test_save_and_load_use_json_only(tmp_path, X):
    est = PROJECTORS[2]().fit(X)
    path = est.save(tmp_path / "rff.json")
    assert [p.name for p in tmp_path.iterdir()] == ["rff.json"]
    loaded = dkrp.load(path)
    assert loaded.transform(X).tobytes() == est.transform(X).tobytes()
    (tmp_path / "bad.json").write_bytes(b"\x80\x04not json")
    with pytest.raises(dkrp.SpecError, match="not a JSON projector spec"):
        dkrp.load(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError):
        dkrp.load(tmp_path / "missing.json")


def test_gamma_scale_is_resolved_at_fit_and_carried_by_the_spec(X):
    est = dkrp.RandomFourierFeatures(gamma="scale", n_components=16, random_state=0).fit(X)
    assert est.gamma_ == pytest.approx(1.0 / (X.shape[1] * X.var()))
    again = dkrp.from_spec(est.to_spec())
    assert again.gamma_ == est.gamma_
    assert again.transform(X).tobytes() == est.transform(X).tobytes()


@pytest.mark.parametrize("name", sorted(DATA_DEPENDENT))
def test_spec_round_trip_and_save_load_learnt(name, tmp_path):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((80, 9))
    est = DATA_DEPENDENT[name]().fit(X)
    Z = est.transform(X)
    spec = json.loads(json.dumps(est.to_spec()))
    assert spec["arrays"]  # learnt arrays travel with the spec
    rebuilt = from_spec(spec)
    assert rebuilt.transform(X).tobytes() == Z.tobytes()
    if hasattr(est, "landmark_indices_"):
        np.testing.assert_array_equal(rebuilt.landmark_indices_, est.landmark_indices_)
    path = est.save(tmp_path / "model.json")
    assert (tmp_path / "model.npz").exists()
    assert "arrays" not in json.loads(path.read_text())
    assert load(path).transform(X).tobytes() == Z.tobytes()
    assert est.save(path) == path  # saving again replaces its own two files
    # the .npz beside a path is written only over the arrays file of a spec saved there:
    # a user's data.npz survives est.save("data.json")
    (tmp_path / "data.npz").write_bytes(b"a user's arrays")
    with pytest.raises(FileExistsError, match="Refusing to write .*data.npz"):
        est.save(tmp_path / "data.json")
    assert (tmp_path / "data.npz").read_bytes() == b"a user's arrays"
    assert not (tmp_path / "data.json").exists()


@pytest.mark.parametrize("name", sorted(BASELINE_MAPS))
def test_spec_round_trip_and_save_load_seeded(name, tmp_path):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((15, 8))
    est = BASELINE_MAPS[name]().fit(X)
    Z = est.transform(X)
    spec = json.loads(json.dumps(est.to_spec()))
    assert spec["arrays"] is None  # data-independent: the seed is the model
    rebuilt = from_spec(spec)
    assert rebuilt.transform(X).tobytes() == Z.tobytes()
    est.save(tmp_path / "model.json")
    assert not (tmp_path / "model.npz").exists()
    assert load(tmp_path / "model.json").transform(X).tobytes() == Z.tobytes()
    # fit needs only n_features: fit_n_features gives the same map.
    alone = type(est)(**est.get_params()).fit_n_features(X.shape[1])
    assert alone.transform(X).tobytes() == Z.tobytes()


def _as_numpy_scalars(params):
    """What a grid from ``np.arange``/``np.logspace`` hands a search: numpy numbers."""
    numpy = {}
    for name, value in params.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            numpy[name] = np.int64(value)
        elif isinstance(value, float):
            numpy[name] = (np.float32(value) if float(np.float32(value)) == value
                           else np.float64(value))  # float32 where it is the same number
    return numpy


@pytest.mark.parametrize("make", [*PROJECTORS, *BASELINE_MAPS.values(), *DATA_DEPENDENT.values()],
                         ids=[*IDS, *BASELINE_MAPS, *DATA_DEPENDENT])
def test_numpy_scalar_parameters_give_the_spec_of_the_numbers_they_equal(make, X):
    # n_components=np.int64(10) from np.arange failed in to_spec ("Object of type int64 is
    # not JSON serializable"), so every ensemble voter and dask task of such a map failed
    plain = make()
    numpy = make().set_params(**_as_numpy_scalars(plain.get_params(deep=False)))
    assert any(isinstance(v, np.integer) for v in numpy.get_params(deep=False).values())
    rows = X[:300]
    spec, numpy_spec = plain.fit(rows).to_spec(), numpy.fit(rows).to_spec()
    assert json.dumps(numpy_spec["params"], sort_keys=True) == json.dumps(spec["params"],
                                                                         sort_keys=True)
    assert numpy_spec["params_checksum"] == spec["params_checksum"]
    assert numpy_spec["checksum"] == spec["checksum"]
    assert dkrp.from_spec(numpy_spec).transform(rows).tobytes() == plain.transform(rows).tobytes()
