"""dkrp._blockwise, the dask path: featurize and fit_dask on dask arrays (no cluster).

Graphs are lazy and deterministic; wrong input is refused before any task runs;
fitting from a dask array reads what it claims (landmark blocks once, or nothing).
"""

import dask
import dask.array as da
import numpy as np
import pytest
from projector_cases import DATA_DEPENDENT

from dkrp import PolynomialRandomProjection
from dkrp.baselines import KulisGraumanRP, Nystroem
from dkrp.baselines._landmarks import sample_landmark_indices
from dkrp.parallel import featurize


def _counted(X, chunks):
    """A dask array of X whose block reads are recorded: (array, list of row-block indices,
    one entry per (row block, column block) read)."""
    calls = []

    def produce(block, block_info=None):
        calls.append(block_info[None]["chunk-location"][0])
        return block

    return da.from_array(X, chunks=chunks).map_blocks(produce, dtype=X.dtype), calls


def _krp(n_features=64, **params):
    params = {"n_components": 96, "n_hyperplanes": 200, "n_terms": 2, "random_state": 7, **params}
    return PolynomialRandomProjection(**params).fit_n_features(n_features)



def test_graph_is_small_deterministic_and_lazy():
    rng = np.random.default_rng(1)
    Xd, calls = _counted(rng.standard_normal((1000, 64)), chunks=(250, 64))
    krp = _krp()
    a, b = featurize(Xd, krp), featurize(Xd, krp)
    assert a.name == b.name and set(a.dask) == set(b.dask)  # deterministic keys
    # another seed, another graph
    assert featurize(Xd, _krp(random_state=8)).name != a.name
    # only the JSON spec travels: each featurize task pickles to a few KB, while the
    # pool alone is 200 x 64 float64 = 100 KB
    import cloudpickle

    layer = a.dask.layers[a.name]
    sizes = [len(cloudpickle.dumps(task)) for task in dict(layer).values()]
    assert len(sizes) == 4 and max(sizes) < 8_000
    assert calls == []  # still a lazy graph: no block of X was read


def test_wrong_feature_count_refused_before_any_task_runs():
    # R13: scikit-learn's wording, raised while building the graph (nothing computed)
    X = da.zeros((100, 63), chunks=(10, 63))
    msg = "X has 63 features, but PolynomialRandomProjection is expecting 64 features as input."
    with pytest.raises(ValueError, match=msg):
        featurize(X, _krp())


@pytest.mark.parametrize(
    ("X", "match"),
    [
        (da.zeros((10,), chunks=5), "Expected 2D array, got 1D array"),
        (da.from_array(np.array([["a"] * 64] * 4)), "not numeric"),
    ],
)
def test_bad_input_refused(X, match):
    with pytest.raises(ValueError, match=match):
        featurize(X, _krp())

# -- fit on dask arrays ----------------------------------------------------------------


@pytest.mark.parametrize("chunks", [(17, 12), (64, 12), (200, 6)])
@pytest.mark.parametrize("name", sorted(DATA_DEPENDENT))
def test_dask_fit_equals_numpy_fit(name, chunks):
    """Same seed and n_samples: the same landmarks whatever the chunking (one pass)."""
    rng = np.random.default_rng(6)
    X = rng.standard_normal((200, 12))
    ref = DATA_DEPENDENT[name]().fit(X)
    Xd, calls = _counted(X, chunks)
    with dask.config.set(scheduler="synchronous"):
        est = DATA_DEPENDENT[name]().fit(Xd)
    # one pass: PCA reads every block once, landmark maps only the blocks holding landmarks
    if name.startswith("pca"):
        needed = set(range(len(Xd.chunks[0])))
    else:
        starts = np.cumsum((0, *Xd.chunks[0]))
        needed = set((np.searchsorted(starts, ref.landmark_indices_, side="right") - 1).tolist())
    n_column_blocks = len(Xd.chunks[1])
    # each (row block, column block) holding what is needed is read exactly once
    assert sorted(calls) == sorted(list(needed) * n_column_blocks), (sorted(calls), needed)
    assert est.n_features_in_ == 12 and est.seed_ == ref.seed_
    for key, value in ref._state_arrays().items():
        got = est._state_arrays()[key]
        if name.startswith("pca"):  # sums over blocks round differently
            np.testing.assert_allclose(got, value, rtol=1e-9, atol=1e-12, err_msg=key)
        else:
            np.testing.assert_array_equal(got, value, err_msg=key)
    if not name.startswith("pca"):
        assert est.spec_checksum_ == ref.spec_checksum_
    np.testing.assert_allclose(est.transform(X), ref.transform(X), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["nystroem", "kg-rp", "pca"])
def test_dask_fit_reads_each_block_at_most_once(name):
    """One sampling pass: every source block is produced at most once during fit."""
    import dask

    rng = np.random.default_rng(9)
    X = rng.standard_normal((400, 12))
    calls = []

    def produce(block, block_info=None):
        calls.append(block_info[None]["chunk-location"][0])
        return block

    Xd = da.from_array(X, chunks=(25, 12)).map_blocks(produce, dtype=X.dtype)
    with dask.config.set(scheduler="synchronous"):
        est = DATA_DEPENDENT[name]().fit(Xd)
    assert len(calls) == len(set(calls)), sorted(calls)
    if name == "pca":
        assert sorted(calls) == list(range(16))
    else:
        needed = set((est.landmark_indices_ // 25).tolist())
        assert set(calls) == needed


def test_fit_dispatches_dask_input_to_the_one_pass_fit():
    """est.fit(dask array) goes through dkrp._blockwise.fit_dask (same landmarks)."""
    pytest.importorskip("dkrp.parallel")
    rng = np.random.default_rng(10)
    X = rng.standard_normal((150, 5))
    ref = KulisGraumanRP(n_components=8, n_landmarks=20, n_terms=4, random_state=2).fit(X)
    Xd, calls = _counted(X, (40, 5))
    with dask.config.set(scheduler="synchronous"):
        est = KulisGraumanRP(n_components=8, n_landmarks=20, n_terms=4, random_state=2).fit(Xd)
    assert est.spec_checksum_ == ref.spec_checksum_
    assert sorted(calls) == sorted(set((ref.landmark_indices_ // 40).tolist()))  # one pass


def test_dask_fit_reports_bad_landmark_row_and_unknown_sizes():
    X = np.random.default_rng(0).standard_normal((60, 4))
    idx = sample_landmark_indices(3, 60, 10)
    X[idx[4], 1] = np.inf
    with pytest.raises(ValueError, match=f"training row {idx[4]}"):
        Nystroem(n_components=10, random_state=3).fit(da.from_array(X, chunks=7))
    Xd = da.from_array(np.ones((10, 3)), chunks=5)
    Xd = Xd[Xd[:, 0] > 0]  # unknown row count
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        Nystroem(n_components=3, random_state=0).fit(Xd)


@pytest.mark.parametrize("gamma, passes", [(0.5, 0), ("scale", 1)])
def test_data_independent_fit_reads_only_what_it_needs(gamma, passes):
    """KRP and RFF fit from X.shape[1]: no block is read; gamma='scale' reads X once."""
    from dkrp import RandomFourierFeatures

    X = np.random.default_rng(11).standard_normal((300, 6))
    Xd, calls = _counted(X, (50, 6))
    with dask.config.set(scheduler="synchronous"):
        PolynomialRandomProjection(n_components=8, n_hyperplanes=16, random_state=0).fit(Xd)
        assert calls == []
        RandomFourierFeatures(gamma=gamma, n_components=8, random_state=0).fit(Xd)
    assert sorted(calls) == sorted(list(range(6)) * passes)
