"""Big jobs say what they are before they start, and past --confirm-above ask first
(issue 29, item 10: `featurize --method rff --n-components 200000` wrote 22.5 GiB without
a word; `train --voters 100000` ran for minutes with no estimate).

All in this process: refusals happen before any cluster starts, and the jobs that run use
an in-process cluster (``--scheduler inproc://...``). CliRunner's stdin is not a terminal,
so without --yes a big job is refused; the interactive question is reached by replacing
:func:`dkrp.cli._confirm.stdin_is_interactive`, the one place that decides it.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest
import zarr
from click.testing import CliRunner
from sklearn.datasets import load_digits

import dkrp
from dkrp.cli import main
from dkrp.feature_store import open_features
from dkrp.io import ingest
from dkrp.parallel import start_local_cluster


def _run(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kwargs)


@pytest.fixture(scope="module")
def digits_inputs(tmp_path_factory):
    """Digits (1797 x 64) as ``x.npy`` and as the labelled dataset store ``train.zarr``."""
    root = tmp_path_factory.mktemp("digits")
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    np.save(root / "x.npy", X)
    pd.DataFrame(X, columns=[f"p{i}" for i in range(64)]).assign(label=y).to_csv(
        root / "train.csv", index=False)
    ingest(root / "train.csv", root / "train.zarr", label_column="label")
    return root


@pytest.fixture(scope="module")
def scheduler_address():
    with start_local_cluster(n_workers=1, threads_per_worker=2, processes=False) as cluster:
        yield cluster.scheduler_address


#: Cannot start the embedded cluster: a job that went past the question (dkrp before issue
#: 29, or a regression) fails there in a second instead of writing 10 GiB or training 10**6
#: voters, and a refusal with it shows that nothing was started.
NO_CLUSTER = ("--memory-limit", "lots")


@pytest.fixture
def interactive(monkeypatch):
    """As if stdin were a terminal: the question is asked (answered by ``input=``)."""
    monkeypatch.setattr("dkrp.cli._confirm.stdin_is_interactive", lambda: True)


# -- featurize -------------------------------------------------------------------------------


def test_featurize_prints_its_size_and_estimated_time_and_refuses_without_yes(
        digits_inputs, tmp_path):
    out = tmp_path / "f.zarr"
    r = _run("featurize", digits_inputs / "x.npy", out, "--method", "rff", "--n-components",
             2000, "--confirm-above", "10MiB", *NO_CLUSTER)
    assert r.exit_code == 1, r.output
    announce, refusal = r.output.splitlines()
    # the .npy reader's row blocks (and so the chunk grid) follow the CPUs this process has
    grid = re.match(re.escape(
        f"featurize: {out.absolute()} will hold 1797 x 2000 float64 features = 27.4 MiB; "
        "27.4 MiB to write in ") + r"(\d+) chunks of (\d+) rows; estimated ", announce)
    assert grid, announce
    n_chunks, rows = map(int, grid.groups())
    assert (n_chunks - 1) * rows < 1797 <= n_chunks * rows
    assert "rows/s measured on one core over 1024 sample rows" in announce
    assert "disk writes not included" in announce
    assert refusal == (f"Error: featurize would write 27.4 MiB to {out.absolute()}, more than "
                       "--confirm-above 10.0 MiB: pass --yes to start it (dkrp asks only on "
                       "a terminal). Nothing was started.")
    assert not out.exists() and not list(tmp_path.iterdir())
    # --quiet: no announcement, the same one-line refusal
    r = _run("featurize", digits_inputs / "x.npy", out, "--method", "rff", "--n-components",
             2000, "--confirm-above", "10MiB", "--quiet", *NO_CLUSTER)
    assert r.exit_code == 1 and r.output == refusal + "\n"
    assert not out.exists()


def test_featurize_asks_from_10_gib_by_default(digits_inputs, tmp_path):
    # 1797 x 800000 float64 = 10.7 GiB: the 22.5 GiB job, a little smaller
    if shutil.disk_usage(tmp_path).free < 11 * 2**30:
        pytest.skip("the output must fit the disk, or the disk check refuses it first")
    out = tmp_path / "big.zarr"
    r = _run("featurize", digits_inputs / "x.npy", out, "--method", "rff", "--n-components",
             800_000, "--quiet", *NO_CLUSTER)
    assert r.exit_code == 1
    assert r.output == (f"Error: featurize would write 10.7 GiB to {out.absolute()}, more "
                        "than --confirm-above 10.0 GiB: pass --yes to start it (dkrp asks "
                        "only on a terminal). Nothing was started.\n")
    assert not out.exists()


def test_featurize_asks_on_a_terminal_and_yes_skips_the_question(
        digits_inputs, tmp_path, scheduler_address, interactive):
    out = tmp_path / "f.zarr"
    job = ("featurize", digits_inputs / "x.npy", out, "--method", "krp", "--n-components",
           200, "--chunk-rows", 500, "--scheduler", scheduler_address, "--confirm-above", 0)
    r = _run(*job, input="n\n")
    assert r.exit_code == 1
    assert (f"featurize would write 2.7 MiB to {out.absolute()}, more than --confirm-above "
            "0 B. Start it? [y/N]: n\n") in r.output
    assert r.output.endswith("Error: Not started: nothing was written.\n")
    assert not out.exists()
    r = _run(*job, input="y\n")
    assert r.exit_code == 0, r.output
    assert "Start it? [y/N]: y\n" in r.output and "featurized 1797 rows" in r.output
    assert open_features(out).Z.shape == (1797, 200)
    # a resumed store counts only what is left; --yes starts it without a question
    (out / "Z" / "c" / "1" / "0").unlink()
    r = _run(*job, "--yes")
    assert r.exit_code == 0, r.output
    assert ("= 2.7 MiB; 781.2 KiB of it left to write in 1 of 4 chunks of 500 rows; "
            "estimated ") in r.output
    assert "Start it?" not in r.output and "1 chunks written, 3 already done" in r.output
    # a finished store has nothing to write: nothing to ask, even without --yes
    r = _run(*job[:-2])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("nothing to do (store complete)"), r.output


# -- train -----------------------------------------------------------------------------------


def test_train_estimates_its_time_and_refuses_without_yes_before_any_cluster(
        digits_inputs, tmp_path):
    # 10**6 voters on 2 cores: hours at any speed one voter of digits can take; the
    # default --confirm-above is 30 min
    model_dir = tmp_path / "model"
    r = _run("train", digits_inputs / "train.zarr", "--out", model_dir, "--voters", 10**6,
             "--n-components", 100, "--n-workers", 2, *NO_CLUSTER)
    assert r.exit_code == 1, r.output
    announce, refusal = r.output.splitlines()
    assert announce.startswith("train: 1000000 voter(s), each 100 rff features and "
                               "PrimalLinearSVC on 1797 rows; estimated ")
    assert " on 2 cores (one voter took " in announce
    assert announce.endswith(" s on one core on 1000 sample rows, scaled linearly to 1797 "
                             "rows; an estimate)")

    def is_refusal(line):
        return line.startswith("Error: train is estimated to take ") and line.endswith(
            "(1000000 voter(s) on 2 cores), more than --confirm-above 30 min: pass --yes to "
            "start it (dkrp asks only on a terminal). Nothing was started.")

    assert is_refusal(refusal), refusal
    assert "dask dashboard" not in r.output and not model_dir.exists()
    # --quiet: the refusal only (a new measurement, so another estimate)
    r = _run("train", digits_inputs / "train.zarr", "--out", model_dir, "--voters", 10**6,
             "--n-components", 100, "--n-workers", 2, "-q", *NO_CLUSTER)
    assert r.exit_code == 1 and r.output.count("\n") == 1 and is_refusal(r.output.strip())
    # a limit that is not a duration names the flag
    r = _run("train", digits_inputs / "train.zarr", "--out", model_dir, "--confirm-above",
             "soon")
    assert r.exit_code == 2 and "Invalid value for '--confirm-above'" in r.output


def test_train_asks_on_a_terminal_and_counts_voters_as_they_finish(
        digits_inputs, tmp_path, scheduler_address, interactive):
    model_dir = tmp_path / "model"
    job = ("train", digits_inputs / "train.zarr", "--out", model_dir, "--voters", 3,
           "--n-components", 50, "--scheduler", scheduler_address, "--confirm-above", 0)
    r = _run(*job, input="n\n")
    assert r.exit_code == 1
    assert "(3 voter(s) on 2 cores), more than --confirm-above 0 s. Start it? [y/N]: n\n" \
        in r.output
    assert not model_dir.exists()
    r = _run(*job, input="y\n")
    assert r.exit_code == 0, r.output
    assert r.output.startswith("train: 3 voter(s), each 50 rff features and "
                               "PrimalLinearSVC on 1797 rows; estimated ")
    assert "voters: 100%" in r.output and "3/3" in r.output  # the bar, voter by voter
    assert "trained 3 voter(s) on 1797 rows" in r.output
    assert len(dkrp.load(model_dir).estimators_) == 3
    # --yes and --quiet: no estimate, no question, no bar
    r = _run(*job, "--yes", "--quiet", "--overwrite")
    assert r.exit_code == 0, r.output
    assert "train:" not in r.output and "voters:" not in r.output
    assert "Start it?" not in r.output and "trained 3 voter(s)" in r.output


def test_a_resumed_store_is_sized_by_what_it_lacks(digits_inputs, tmp_path,
                                                   scheduler_address):
    from dkrp.jobs import open_input, size_job
    from dkrp.methods import make_projector

    out = tmp_path / "f.zarr"
    r = _run("featurize", digits_inputs / "x.npy", out, "--method", "krp", "--n-components",
             40, "--chunk-rows", 500, "--scheduler", scheduler_address, "-q")
    assert r.exit_code == 0, r.output
    zarr.open_array(str(out / "done"), mode="r+")[2] = 0  # as if killed before chunk 2
    X, _ = open_input(digits_inputs / "x.npy")
    krp = make_projector("krp", n_components=40)
    size = size_job(X, krp, out)
    assert (size["rows_to_write"], size["chunks_to_write"]) == (500, 1)
    assert size["bytes_to_write"] == 500 * 40 * 8 and size["bytes"] == 1797 * 40 * 8
    # --overwrite may replace the store: every chunk counts
    assert size_job(X, krp, out, overwrite=True)["rows_to_write"] == 1797
