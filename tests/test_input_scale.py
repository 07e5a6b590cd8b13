"""featurize warns when the input's scale is far from what the map expects (issue 29, 12).

KRP's polynomial kernel wants rows of norm near 1 and RFF wants gamma * ||x - y||^2
near 1 (``dkrp methods``); raw Covertype rows have norms in the thousands. The check
reads nothing of its own: it uses the first and last rows that the run reads for the
store's input fingerprint. Real stores on disk; the command line against an in-process
cluster, the library on dask's local scheduler.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from click.testing import CliRunner

import dkrp
from dkrp.cli import main

#: Covertype-like raw rows: distances and elevations in the thousands
RAW = np.random.default_rng(3).uniform(0.0, 7000.0, (120, 10))


@pytest.fixture(scope="module")
def scheduler_address():
    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=1, threads_per_worker=2, processes=False) as cluster:
        yield cluster.scheduler_address


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_featurize_warns_once_on_raw_rows_and_not_on_scaled_ones(tmp_path, scheduler_address):
    np.save(tmp_path / "raw.npy", RAW)
    base = ["featurize", tmp_path / "raw.npy", "--method", "krp", "--n-components", 16,
            "--n-hyperplanes", 32, "--scheduler", scheduler_address, "--quiet"]
    r = _run(*base[:2], tmp_path / "raw.zarr", *base[2:])
    assert r.exit_code == 0, r.output
    warnings = [line for line in r.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, r.output
    norm = max(np.linalg.norm(RAW[0]), np.linalg.norm(RAW[-1]))
    assert f"norm up to {norm:.3g}" in warnings[0]
    assert "Scale the input: --scale-rows unit, or --standardize" in warnings[0]
    assert "scale_rows=" not in warnings[0] and "standardize=" not in warnings[0]
    for flags in (["--standardize"], ["--scale-rows", "unit"]):
        r = _run(*base[:2], tmp_path / f"{flags[-1]}.zarr", *base[2:], *flags)
        assert r.exit_code == 0, r.output
        assert "warning:" not in r.output, r.output


def _featurize(tmp_path, name, projector, X=RAW, **options):
    lines = []
    result = dkrp.featurize_to_store(da.from_array(X, chunks=(40, X.shape[1])),
                                     tmp_path / f"{name}.zarr", projector, progress=False,
                                     on_warning=lines.append, **options)
    return lines, result


def test_rff_warns_on_a_fixed_gamma_far_from_the_rows_scale(tmp_path):
    lines, _ = _featurize(tmp_path, "rff", dkrp.RandomFourierFeatures(n_components=8))
    assert len(lines) == 1 and "gamma * ||x - y||^2 is" in lines[0]
    assert "about 0 for any two rows" in lines[0]
    assert "Scale the input: standardize=True, or let gamma follow the data: gamma='scale'" in (
        lines[0])
    assert "--" not in lines[0]
    for name, est, options in (
            ("std", dkrp.RandomFourierFeatures(n_components=8), {"standardize": True}),
            ("scale", dkrp.RandomFourierFeatures(n_components=8, gamma="scale"), {})):
        assert _featurize(tmp_path, name, est, **options)[0] == []


def test_only_maps_that_expect_a_scale_and_only_runs_that_fit_them_warn(tmp_path):
    # srf puts every row on the unit sphere itself
    assert _featurize(tmp_path, "srf", dkrp.SphericalRandomFeatures(n_components=8))[0] == []
    lines, result = _featurize(tmp_path, "krp", dkrp.PolynomialRandomProjection(
        n_components=8, n_hyperplanes=16, random_state=0))
    assert len(lines) == 1 and "krp expects" in lines[0]
    # a rerun on the finished store, and a test set given the fitted map (--like), were
    # warned about when the map was fitted
    assert _featurize(tmp_path, "krp", result.projector)[0] == []
    assert _featurize(tmp_path, "like", dkrp.from_spec(result.projector.to_spec()))[0] == []
    # the rows read by the plan (a store being replaced) are checked too
    other = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16, random_state=1)
    lines, _ = _featurize(tmp_path, "krp", other, overwrite=True)
    assert len(lines) == 1 and "krp expects" in lines[0]
    # tiny rows are as far from norm 1 as huge ones
    est = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16, random_state=0)
    lines, _ = _featurize(tmp_path, "tiny", est, X=RAW * 1e-9)
    norm = max(np.linalg.norm(RAW[0]), np.linalg.norm(RAW[-1])) * 1e-9
    assert len(lines) == 1 and f"norm up to {norm:.3g} " in lines[0]


def test_scale_warning_reads_rows_as_the_map_scales_them():
    from dkrp.methods import scale_warning

    est = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16, random_state=0)
    est.fit(RAW)
    rows = (RAW[:1], RAW[-1:])
    assert "krp expects" in scale_warning(est, rows)
    dkrp.preprocessing.fit_scaled(est, RAW, standardize=True)
    assert scale_warning(est, rows) is None
    import scipy.sparse as sp

    est = dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16, random_state=0)
    est.fit(RAW)
    assert "krp expects" in scale_warning(est, tuple(sp.csr_matrix(r) for r in rows))
    assert scale_warning(est, (np.zeros((1, 10)),)) is None  # an empty row says nothing


# --- the examples we show scale their input as `dkrp methods` asks --------------------------

#: Maps that want no scaling from the user (srf normalises rows itself; pca only with mixed
#: units, which the examples do not say)
_SCALE_FREE = {"srf", "pca"}


def _featurize_examples():
    """Every ``dkrp featurize`` command the README, the user guide (``docs/``) and the
    command line's help show, one string each (continuation lines joined, comments dropped)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    built = {"_build", "auto_examples", "generated"}  # what a docs build writes
    guide = [page.read_text() for page in sorted((root / "docs").rglob("*.rst"))
             if not built & set(page.relative_to(root / "docs").parts)]
    texts = [(root / "README.md").read_text(), *guide, main.help or "",
             main.commands["featurize"].help]
    return [line.split("#")[0].strip() for text in texts
            for line in text.replace("\\\n", " ").splitlines()
            if line.strip().startswith("dkrp featurize ")]


def test_every_featurize_example_scales_its_input_as_its_map_asks():
    """The README's Covertype example ran KRP on raw rows (largest value 1.28e7 after the
    map), and `dkrp featurize --help`'s float16 example on raw MNIST pixels failed: the
    features do not fit float16. An example a user copies must follow `dkrp methods`."""
    import shlex

    examples = _featurize_examples()
    assert len(examples) >= 10, examples
    unscaled = []
    for line in examples:
        args = shlex.split(line)
        method = args[args.index("--method") + 1] if "--method" in args else "krp"
        scaled = ({"--scale-rows", "--standardize", "--like", "--spec"} & set(args)
                  or (method == "rff" and "scale" in args))  # --gamma scale
        if method not in _SCALE_FREE and not scaled:
            unscaled.append(line)
    assert not unscaled, "\n".join(unscaled)
