"""A featurize job's options as objects: StoreOptions, ScalingOptions, JobHooks.

The objects refuse bad values with the messages the options always had; the keyword form
and the object form of :func:`dkrp.featurize_to_store` (and of the feature-store layers
below it) write byte-identical stores; an unknown keyword, or an option given both ways,
is refused before anything is written. Real Zarr stores on disk, written on dask's local
scheduler (no cluster).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect

import dask.array as da
import numpy as np
import pytest
import zarr
from conftest import store_digest

import dkrp
from dkrp import JobHooks, ScalingOptions, StoreOptions, featurize_to_store
from dkrp.errors import DkrpError, InvalidInputError, InvalidTypeError
from dkrp.feature_store import open_features, plan_features, write_features
from dkrp.io import ingest
from dkrp.jobs import size_job

N_ROWS, N_FEATURES, CHUNK = 300, 6, 100


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A dataset store of float32 rows with labels, and the rows."""
    folder = tmp_path_factory.mktemp("input")
    X = np.random.default_rng(31).uniform(0, 5, (N_ROWS, N_FEATURES)).astype(np.float32)
    np.save(folder / "x.npy", X)
    ingest(folder / "x.npy", folder / "x.zarr", chunk_rows=CHUNK, dtype="float32")
    return folder / "x.zarr", X


# -- the objects ------------------------------------------------------------------------

BAD_VALUES = [
    # (class, keywords, error, the message the option had before it was an object)
    (StoreOptions, {"bits": True, "store_dtype": "float16"}, InvalidInputError,
     "A bit store holds packed uint8 signs: drop store_dtype or bits."),
    (StoreOptions, {"store_dtype": "int8"}, InvalidInputError,
     "store_dtype must be one of float16, float32, float64; got 'int8'."),
    (StoreOptions, {"compressor": "lz"}, InvalidInputError,
     "compressor must be one of none, zstd, gzip, blosc-lz4, blosc-zstd; got 'lz'."),
    (StoreOptions, {"dtype": "float16"}, InvalidInputError,
     "dtype must be float32 or float64, got float16."),
    (StoreOptions, {"chunk_rows": 0}, InvalidInputError, "chunk_rows must be >= 1, got 0."),
    (StoreOptions, {"chunk_rows": 2.5}, InvalidInputError,
     "chunk_rows must be an integer, got 2.5 of type float."),
    (ScalingOptions, {"scale_rows": "l2"}, InvalidInputError,
     "scale_rows must be None or one of ('unit',), got 'l2'."),
    (JobHooks, {"progress": "yes"}, InvalidTypeError,
     "progress must be True, False, None or a callable, got str."),
    (JobHooks, {"on_plan": 3}, InvalidTypeError, "on_plan must be a callable or None, got int."),
    (JobHooks, {"on_warning": "print"}, InvalidTypeError,
     "on_warning must be a callable or None, got str."),
]


@pytest.mark.parametrize("cls, keywords, error, message", BAD_VALUES,
                         ids=[f"{c.__name__}-{'-'.join(k)}" for c, k, _, _ in BAD_VALUES])
def test_bad_values_are_refused_with_the_options_messages(cls, keywords, error, message):
    with pytest.raises(error) as info:
        cls(**keywords)
    assert str(info.value) == message and isinstance(info.value, DkrpError)


def test_values_are_normalised_and_the_objects_frozen():
    store = StoreOptions(dtype="float32", store_dtype=np.float16, compressor=None, bits=0)
    assert store == StoreOptions(dtype=np.float32, store_dtype="float16")
    assert store.dtype == np.dtype(np.float32) and store.store_dtype == np.dtype(np.float16)
    assert store.compressor == "none" and store.bits is False
    assert ScalingOptions(standardize=1) == ScalingOptions(standardize=True)
    assert not ScalingOptions().asked and ScalingOptions(scale_rows="unit").asked
    for value, field in ((store, "bits"), (ScalingOptions(), "standardize"),
                         (JobHooks(), "progress")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, True)


def test_featurize_to_store_is_at_most_80_lines():
    # the measure: def line to last line, docstring included
    tree = ast.parse(inspect.getsource(dkrp.jobs))
    (node,) = [n for n in tree.body
               if isinstance(n, ast.FunctionDef) and n.name == "featurize_to_store"]
    assert node.end_lineno - node.lineno + 1 <= 80


# -- keywords and objects give the same store ---------------------------------------------

STORES = {
    "float16-zstd-scaled": (
        lambda X: dkrp.PolynomialRandomProjection(n_components=24, n_hyperplanes=32,
                                                  random_state=5),
        {"dtype": "float32", "store_dtype": "float16", "compressor": "zstd",
         "chunk_rows": 64},
        {"standardize": True, "scale_rows": "unit"}),
    "bits-gzip": (
        lambda X: dkrp.SignProductEmbedding(n_components=20, random_state=6).fit(X),
        {"bits": True, "compressor": "gzip"}, {}),
}


@pytest.mark.parametrize("name", list(STORES))
def test_keywords_and_objects_write_byte_identical_stores(dataset, tmp_path, name):
    path, X = dataset
    make, store, scaling = STORES[name]
    seen = {"keywords": [], "objects": []}
    old = featurize_to_store(path, tmp_path / "old.zarr", make(X), progress=False,
                             on_plan=seen["keywords"].append, **store, **scaling)
    new = featurize_to_store(path, tmp_path / "new.zarr", make(X),
                             store=StoreOptions(**store), scaling=ScalingOptions(**scaling),
                             hooks=JobHooks(progress=False, on_plan=seen["objects"].append))
    assert old.action == new.action == "create"
    old_files, new_files = (store_digest(tmp_path / n) for n in ("old.zarr", "new.zarr"))
    assert old_files.keys() == new_files.keys()
    if store["compressor"] == "gzip":
        # a gzip header holds the second it was written: the files may differ, the values not
        old_files = {k: v for k, v in old_files.items() if "/c/" not in k}
        new_files = {k: v for k, v in new_files.items() if "/c/" not in k}
        old_arrays, new_arrays = (dict(zarr.open_group(tmp_path / n, mode="r").arrays())
                                  for n in ("old.zarr", "new.zarr"))
        assert old_arrays.keys() == new_arrays.keys() and "Z" in old_arrays
        for name, a in old_arrays.items():
            assert a[...].tobytes() == new_arrays[name][...].tobytes(), name
    assert old_files == new_files
    assert [p["attrs"] for p in seen["keywords"]] == [p["attrs"] for p in seen["objects"]]
    attrs = open_features(tmp_path / "new.zarr").attrs
    assert attrs["compressor"] == store["compressor"]
    assert attrs["chunk_rows"] == store.get("chunk_rows", CHUNK)
    assert attrs["encoding"] == ("bits" if store.get("bits") else "float")
    assert attrs["dtype"] == ("uint8" if store.get("bits") else store["store_dtype"])
    assert ("preprocessing" in attrs["spec"].get("fitted", {})) == bool(scaling)
    # and the object form finds the store finished
    again = featurize_to_store(path, tmp_path / "new.zarr", make(X), store=StoreOptions(**store),
                               scaling=ScalingOptions(**scaling), progress=False)
    assert again.action == "noop"


def test_the_layers_take_the_object_or_the_keywords(dataset, tmp_path):
    path, X = dataset
    Xd = da.from_array(X, chunks=(CHUNK, N_FEATURES))
    krp = dkrp.PolynomialRandomProjection(n_components=16, random_state=2).fit(X)
    keywords = {"dtype": "float32", "store_dtype": "float16", "compressor": "blosc-lz4"}
    store = StoreOptions(**keywords, chunk_rows=50)
    old = plan_features(Xd, krp, tmp_path / "p.zarr", chunk_rows=50, **keywords)
    new = plan_features(Xd, krp, tmp_path / "p.zarr", store=store)
    assert old["attrs"] == new["attrs"] and old["store"] == new["store"]
    assert new["attrs"]["chunk_rows"] == 50 and new["attrs"]["compressor"] == "blosc-lz4"
    # size_job has no compressor: it sizes the bytes before compression
    sizes = {key: value for key, value in keywords.items() if key != "compressor"}
    assert size_job(Xd, krp, tmp_path / "p.zarr", chunk_rows=50, **sizes) == \
        size_job(Xd, krp, tmp_path / "p.zarr", store=store)
    write_features(Xd, krp, tmp_path / "a.zarr", progress=False, **keywords)
    write_features(Xd, krp, tmp_path / "b.zarr", progress=False, store=StoreOptions(**keywords))
    assert store_digest(tmp_path / "a.zarr") == store_digest(tmp_path / "b.zarr")


# -- refusals -----------------------------------------------------------------------------


def test_unknown_keywords_and_options_given_twice_are_refused(dataset, tmp_path):
    path, X = dataset
    out = tmp_path / "f.zarr"
    krp = dkrp.PolynomialRandomProjection(n_components=8, random_state=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'store_dtpye'"):
        featurize_to_store(path, out, krp, store_dtpye="float16")
    with pytest.raises(TypeError, match=r"got bits= beside store=StoreOptions\(...\)"):
        featurize_to_store(path, out, krp, store=StoreOptions(compressor="zstd"), bits=True)
    with pytest.raises(TypeError, match=r"got scale_rows= beside scaling=ScalingOptions"):
        featurize_to_store(path, out, krp, scaling=ScalingOptions(), scale_rows="unit")
    with pytest.raises(TypeError, match="got progress= beside hooks=JobHooks"):
        featurize_to_store(path, out, krp, hooks=JobHooks(), progress=False)
    with pytest.raises(TypeError, match="store must be a StoreOptions, got dict"):
        featurize_to_store(path, out, krp, store={"bits": True})
    Xd = da.from_array(X, chunks=(CHUNK, N_FEATURES))
    with pytest.raises(TypeError, match=r"plan_features\(\) got compressor= beside store="):
        plan_features(Xd, krp.fit(X), out, store=StoreOptions(), compressor="zstd")
    with pytest.raises(TypeError, match=r"size_job\(\) got dtype= beside store="):
        size_job(Xd, krp, out, store=StoreOptions(), dtype="float32")
    with pytest.raises(TypeError, match=r"write_features\(\) got store_dtype= beside store="):
        write_features(Xd, krp, out, store=StoreOptions(), store_dtype="float16")
    # bits of a map without them: still refused where the map is known, before any write
    with pytest.raises(InvalidInputError, match="only SignProductEmbedding"):
        featurize_to_store(path, out, krp, store=StoreOptions(bits=True))
    assert not out.exists()
