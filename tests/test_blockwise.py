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


# -- featurize computed in this process (dask's synchronous scheduler) ----------------


@pytest.mark.parametrize(
    ("in_dtype", "dtype", "out"),
    [(np.float64, None, np.float64), (np.float32, None, np.float32),
     (np.float32, "float64", np.float64), (np.float64, "float32", np.float32),
     (np.int64, None, np.float64)],
)
def test_featurize_is_the_transform_of_each_row_block(in_dtype, dtype, out):
    # irregular row blocks: each one is the transform of its rows, cast to the output
    # dtype (float32 input stays float32 unless dtype says otherwise, integers give
    # float64), byte for byte; chunks, dtype and meta say so before anything is computed
    rng = np.random.default_rng(2)
    X = (rng.standard_normal((700, 64)) * 3).astype(in_dtype)
    rows = (300, 250, 150)
    krp = _krp()
    Z = featurize(da.from_array(X, chunks=(rows, 64)), krp, dtype=dtype)
    assert Z.dtype == out and Z.chunks == (rows, (96,))
    assert type(Z._meta) is np.ndarray and Z._meta.shape == (0, 0) and Z._meta.dtype == out
    assert Z.name.startswith("dkrp-featurize-")
    with dask.config.set(scheduler="synchronous"):
        got = Z.compute()
    starts = np.cumsum((0, *rows))[:-1]
    want = np.vstack([krp.transform(X[s:s + n].astype(out))
                      for s, n in zip(starts, rows, strict=True)])
    assert got.dtype == out and got.tobytes() == want.tobytes()


def test_featurize_graph_name_depends_on_input_spec_and_dtype():
    # deterministic keys: the same (input, spec, dtype) gives the same name, any other
    # input or output dtype another (so dask never reuses the wrong results)
    X = da.from_array(np.ones((20, 64)), chunks=(10, 64))
    krp = _krp()
    name = featurize(X, krp).name
    assert featurize(da.from_array(np.ones((20, 64)), chunks=(10, 64)), krp).name == name
    assert featurize(X + 1, krp).name != name
    assert featurize(X, krp, dtype="float32").name != name
    assert featurize(X, krp, dtype="float64").name == name


def test_featurize_names_the_partition_and_global_row_of_bad_input():
    X = np.random.default_rng(3).standard_normal((700, 64))
    X[555, 7] = np.nan  # partition 2 starts at global row 550
    Z = featurize(da.from_array(X, chunks=((300, 250, 150), 64)), _krp())
    with dask.config.set(scheduler="synchronous"), pytest.raises(
            ValueError, match=r"^Input X contains NaN \(at partition 2, local row 5, "
                              r"global row 555\)"):
        Z.compute()


def test_transform_partition_refuses_a_block_of_the_wrong_shape():
    from dkrp._blockwise import transform_partition
    from dkrp._spec import spec_json
    from dkrp.errors import PartitionInputError

    text = spec_json(_krp())
    for block in (np.ones((4, 63)), np.ones(64)):
        with pytest.raises(PartitionInputError) as info:
            transform_partition(block, text, "float64", 40, 3)
        assert str(info.value) == (
            f"Partition 3 has shape {block.shape}, but PolynomialRandomProjection is "
            "expecting 64 features as input.")
        assert info.value.partition == 3


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transform_partition_of_sparse_and_dense_blocks(fmt, dtype):
    # a sparse block of any format, in any dtype, gives the dense block's features
    import scipy.sparse as sp

    from dkrp._blockwise import transform_partition
    from dkrp._spec import spec_json

    krp = _krp()
    dense = np.random.default_rng(4).standard_normal((30, 64))
    dense[dense < 0.5] = 0.0
    text = spec_json(krp)
    want = transform_partition(dense.astype(dtype), text, dtype, 0, 0)
    got = transform_partition(sp.csr_matrix(dense).asformat(fmt), text, dtype, 0, 0)
    assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12,
                               atol=1e-5 if dtype == "float32" else 1e-12)
    assert np.array_equal(want, krp.transform(dense.astype(dtype)))
    # the float64 sparse block is cast first: computed in dtype, not rounded afterwards
    assert got.tobytes() == krp.transform(sp.csr_matrix(dense, dtype=dtype)).tobytes()


def test_cached_projector_is_rebuilt_once_per_process_and_names_where_it_failed():
    import os

    from distributed import Client

    from dkrp import _blockwise
    from dkrp._spec import spec_json
    from dkrp.errors import SpecError
    from dkrp.parallel import start_local_cluster

    krp = _krp()
    text = spec_json(krp)
    first = _blockwise.cached_projector(text)
    assert first.spec_checksum_ == krp.spec_checksum_
    assert _blockwise.cached_projector(text) is first  # cached, not rebuilt
    bad = text.replace('"random_state":7', '"random_state":8')  # the checksum of seed 7
    with pytest.raises(SpecError, match=rf"^On process {os.getpid()}: \S"):
        _blockwise.cached_projector(bad)
    assert _blockwise.worker_address() is None
    # in a worker (a real LocalCluster, its workers in this process): the worker is named
    with start_local_cluster(n_workers=1, threads_per_worker=2, processes=False) as cluster, \
            Client(cluster) as client:
        (address,) = client.scheduler_info()["workers"]
        assert client.submit(_blockwise.worker_address, pure=False).result() == address
        with pytest.raises(SpecError, match=rf"^On worker {address}: \S"):
            client.submit(_blockwise.cached_projector, bad, pure=False).result()


@pytest.mark.parametrize(("configured", "threads", "expected"),
                         [(None, 2, 1), ("5", 2, 2), ("1", 2, 1), ("5", 1, 5)])
def test_task_threads_are_the_workers_share_over_its_threads(monkeypatch, configured,
                                                              threads, expected):
    # DKRP_NUM_THREADS (the worker's share of the CPUs) over the worker's task threads;
    # without it one thread per task
    from distributed import Client

    from dkrp._blockwise import task_threads
    from dkrp.parallel import start_local_cluster

    if configured is None:
        monkeypatch.delenv("DKRP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("DKRP_NUM_THREADS", configured)
    with start_local_cluster(n_workers=1, threads_per_worker=threads,
                             processes=False) as cluster, Client(cluster) as client:
        assert client.submit(task_threads, pure=False).result() == expected


def test_map_block_without_block_info_is_the_first_block():
    # dask passes block_info to every block; called without it, a block is partition 0
    from dkrp._blockwise import _map_block
    from dkrp._spec import spec_json

    X = np.random.default_rng(8).standard_normal((5, 64))
    krp = _krp()
    assert np.array_equal(_map_block(X, spec_json(krp), "float64", (0,)), krp.transform(X))


def test_fit_dask_messages_and_what_it_resets():
    import pandas as pd

    krp = PolynomialRandomProjection(n_components=4, n_hyperplanes=8, random_state=0)
    with pytest.raises(ValueError, match=r"^Expected 2D array, got 1D array instead\.$"):
        krp.fit(da.ones(5, chunks=5))
    unknown = da.ones((10, 3), chunks=5)
    unknown = unknown[unknown[:, 0] > 0]
    with pytest.raises(ValueError, match=(
            r"^X has unknown chunk sizes; call X\.compute_chunk_sizes\(\) before fitting "
            r"\(landmark sampling needs n_samples\)\.$")):
        Nystroem(n_components=3, random_state=0).fit(unknown)
    assert krp.fit(unknown).n_features_in_ == 3  # a data-independent map needs no rows
    with pytest.raises(ValueError, match=(r"^0 feature\(s\) \(shape=\(4, 0\)\) while a "
                                          r"minimum of 1 is required\.$")):
        krp.fit(da.ones((4, 0), chunks=2))
    assert krp.fit(da.ones((4, 1), chunks=2)).n_features_in_ == 1
    with pytest.raises(ValueError, match=r"^dask array X must be numeric, got dtype <U1\.$"):
        krp.fit(da.from_array(np.array([["a"]] * 4)))
    # a dask fit after a fit on a named frame forgets the names
    krp.fit(pd.DataFrame(np.ones((4, 2)), columns=["a", "b"]))
    assert list(krp.feature_names_in_) == ["a", "b"]
    krp.fit(da.ones((4, 3), chunks=2))
    assert not hasattr(krp, "feature_names_in_") and krp.n_features_in_ == 3


def test_transform_partition_bits_are_the_packed_signs_of_the_block():
    from dkrp import SignProductEmbedding
    from dkrp._blockwise import transform_partition
    from dkrp._spec import spec_json

    X = np.random.default_rng(5).standard_normal((40, 6)).astype(np.float32)
    est = SignProductEmbedding(n_components=13, random_state=2).fit(X)
    text = spec_json(est)
    bits = transform_partition(X, text, "float32", 0, 0, output="bits")
    assert bits.dtype == np.uint8 and bits.shape == (40, 2)
    assert np.array_equal(bits, est.transform_bits(X))
    features = transform_partition(X, text, "float32", 0, 0)  # features by default
    assert features.dtype == np.float32 and features.shape == (40, 13)
    assert np.array_equal(features, est.transform(X))


def test_prepare_input_refusals_are_whole_sentences():
    from sklearn.exceptions import NotFittedError

    from dkrp._blockwise import prepare_input

    krp = _krp()
    with pytest.raises(ValueError, match=(
            r"^Expected 2D array, got 1D array instead: featurize takes a dask array of "
            r"shape \(n_samples, n_features\)\.$")):
        prepare_input(da.zeros((10,), chunks=5), krp)
    with pytest.raises(ValueError, match=r"^dtype must be float32 or float64, got float16\.$"):
        prepare_input(da.zeros((10, 64), chunks=5), krp, dtype="float16")
    unknown = da.ones((10, 64), chunks=5)
    unknown = unknown[unknown[:, 0] > 0]  # unknown row chunks, known columns
    with pytest.raises(ValueError, match=(
            r"^X has unknown chunk sizes; call X\.compute_chunk_sizes\(\) \(or read it with "
            r"dkrp\.io\.open_dataset, which records them\) before featurizing\.$")):
        prepare_input(unknown, krp)
    # a fit that failed half way (n_features_in_ set, no spec) is not fitted
    X = np.random.default_rng(0).standard_normal((60, 4))
    X[sample_landmark_indices(3, 60, 10)[4], 1] = np.inf
    nys = Nystroem(n_components=10, random_state=3)
    with pytest.raises(ValueError, match="training row"):
        nys.fit(da.from_array(X, chunks=7))
    assert nys.n_features_in_ == 4
    with pytest.raises(NotFittedError):
        prepare_input(da.from_array(X, chunks=7), nys)


def test_featurize_joins_column_blocks_into_one():
    X = np.random.default_rng(6).standard_normal((90, 64))
    krp = _krp()
    Xd = da.from_array(X, chunks=(30, 32))  # two column blocks
    Z = featurize(Xd, krp)
    assert Z.chunks == ((30, 30, 30), (96,))
    with dask.config.set(scheduler="synchronous"):
        got = Z.compute()
    assert got.tobytes() == np.vstack(
        [krp.transform(X[s:s + 30]) for s in (0, 30, 60)]).tobytes()
    one = da.from_array(X, chunks=(30, 64))
    from dkrp._blockwise import prepare_input

    assert prepare_input(one, krp)[0] is one  # already one column block: not rechunked
