"""dkrp._random, the seed contract: a draw depends on (seed, stream, block) only.

Same spec and same row chunking give byte-identical features; any chunking gives
the same features to float tolerance; blocks regenerate alone, in any order and in
any process.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from projector_cases import BASELINE_MAPS, PROJECTORS

import dkrp
from dkrp._random import BLOCK_SIZE, block_generator, draw_block, draw_rows
from dkrp._threading import limit_threads
from dkrp.features.polynomial import ROW_BLOCK

IDS = ["krp", "krp-achlioptas", "rff", "explicit"]


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(5).standard_normal((3 * ROW_BLOCK + 77, 12))


def test_block_generator_is_stateless_and_keyed():
    a = block_generator(3, "pool", 2).standard_normal(5)
    assert np.array_equal(a, block_generator(3, "pool", 2).standard_normal(5))
    assert not np.array_equal(a, block_generator(3, "pool", 1).standard_normal(5))
    assert not np.array_equal(a, block_generator(3, "indices", 2).standard_normal(5))
    assert not np.array_equal(a, block_generator(4, "pool", 2).standard_normal(5))


def test_any_block_regenerates_alone():
    def sampler(rng, n):
        return rng.standard_normal((n, 3))

    full = draw_rows(9, "pool", 3 * BLOCK_SIZE + 10, sampler)
    for b in (3, 1, 0, 2):
        block = draw_block(9, "pool", b, len(full), sampler)
        assert np.array_equal(block, full[b * BLOCK_SIZE : (b + 1) * BLOCK_SIZE])


def test_pool_prefix_is_stable_when_the_pool_grows():
    small = dkrp.PolynomialRandomProjection(n_hyperplanes=BLOCK_SIZE, random_state=1)
    big = dkrp.PolynomialRandomProjection(n_hyperplanes=4 * BLOCK_SIZE, random_state=1)
    a = small.fit_n_features(10).hyperplanes_
    b = big.fit_n_features(10).hyperplanes_
    assert np.array_equal(a, b[:BLOCK_SIZE])


@pytest.mark.parametrize("make", PROJECTORS[:3], ids=IDS[:3])
def test_fit_needs_only_the_number_of_features(make, X):
    a = make().fit(X).transform(X)
    b = make().fit_n_features(X.shape[1]).transform(X)
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("make", PROJECTORS[:3], ids=IDS[:3])
def test_block_order_and_thread_count_do_not_change_bytes(make, X):
    est = make().fit(X)
    whole = est.transform(X)
    bounds = list(range(0, len(X), ROW_BLOCK)) + [len(X)]
    pieces = {}
    for i in reversed(range(len(bounds) - 1)):  # blocks in reverse order
        pieces[i] = est.transform(X[bounds[i] : bounds[i + 1]])
    assert np.concatenate([pieces[i] for i in sorted(pieces)]).tobytes() == whole.tobytes()
    with limit_threads(1):
        assert est.transform(X).tobytes() == whole.tobytes()


@pytest.mark.parametrize("make", PROJECTORS, ids=IDS)
def test_other_chunking_equal_to_float_tolerance(make, X):
    est = make().fit(X)
    whole = est.transform(X)
    pieces = np.concatenate([est.transform(X[s : s + 333]) for s in range(0, len(X), 333)])
    np.testing.assert_allclose(pieces, whole, rtol=1e-10, atol=1e-10 * np.abs(whole).max())


_CHILD = """
import json, sys, numpy as np, dkrp
spec = json.load(open(sys.argv[1]))
X = np.load(sys.argv[2])
np.save(sys.argv[3], dkrp.from_spec(spec).transform(X))
"""


def test_two_processes_produce_byte_identical_features(tmp_path, X):
    est = PROJECTORS[0]().fit(X)
    (tmp_path / "spec.json").write_text(json.dumps(est.to_spec()))
    np.save(tmp_path / "X.npy", X)
    outs = []
    for i, threads in enumerate(("1", "2")):
        out = tmp_path / f"Z{i}.npy"
        env = {"DKRP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
        subprocess.run(
            [sys.executable, "-c", _CHILD, str(tmp_path / "spec.json"), str(tmp_path / "X.npy"),
             str(out)],
            check=True, env={**os.environ, **env}, timeout=300,
        )
        outs.append(np.load(out))
    assert outs[0].tobytes() == outs[1].tobytes() == est.transform(X).tobytes()


def test_random_state_none_records_a_reproducible_seed(X):
    est = dkrp.RandomFourierFeatures(n_components=16).fit(X)
    assert isinstance(est.seed_, int)
    again = dkrp.from_spec(est.to_spec())
    assert again.transform(X).tobytes() == est.transform(X).tobytes()
    other = dkrp.RandomFourierFeatures(n_components=16).fit(X)
    assert other.seed_ != est.seed_


@pytest.mark.parametrize("name", sorted(BASELINE_MAPS))
def test_seed_changes_features(name):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((5, 8))
    a = BASELINE_MAPS[name]().fit(X)
    b = BASELINE_MAPS[name]().set_params(random_state=12).fit(X)
    assert a.spec_checksum_ != b.spec_checksum_
    assert not np.allclose(a.transform(X), b.transform(X))
