"""The pipeline scripts, run as a user runs them (subprocess) against a real cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.data]

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def scheduler_address():
    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=2, threads_per_worker=1) as cluster:
        yield cluster.scheduler_address


def _run_pipeline(script, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, str(REPO_ROOT / "pipelines" / script),
                          *map(str, args)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("REPORT "))
    return json.loads(line[len("REPORT "):]), run.stdout


def test_covertype_pipeline(tmp_path, scheduler_address):
    from conftest import data_dir, require_data

    require_data("covtype", "kaggle_forest_cover_train.csv")
    args = ["--data-dir", data_dir(), "--output", tmp_path, "--scheduler", scheduler_address,
            "--n-components", 64, "--n-hyperplanes", 64, "--chunk-rows", 4000,
            "--classifier", "linearsvc", "--quiet"]
    report, out = _run_pipeline("featurize_covertype.py", *args)
    assert report["featurize"]["rows"] == 15120 and report["featurize"]["chunks_written"] == 4
    assert report["train"]["classifier"] == "linearsvc"
    assert report["train"]["accuracy"] > 0.45  # 7 balanced classes: chance is 0.14
    assert "rows/s" in out and str(tmp_path) in report["features"]
    again, _ = _run_pipeline("featurize_covertype.py", *args)  # resumable: a no-op
    assert again["featurize"]["chunks_written"] == 0


def test_webspam_pipeline_on_w8a_stand_in(tmp_path, scheduler_address):
    """The model beats every predictor that ignores its input, by a band from theory.

    w8a is 97 % negative: accuracy > 0.9 and 0 <= F1 <= 1 hold for "always -1". Balanced
    accuracy (the mean of the two recalls) is exactly 1/2 for any predictor that does
    not look at x, whatever the class balance: if it says +1 with probability q, the
    recalls are Binomial(n_pos, q)/n_pos and Binomial(n_neg, 1-q)/n_neg, so the balanced
    accuracy has mean 1/2 and standard deviation
    sqrt(q(1-q) (1/n_pos + 1/n_neg)) / 2 <= sqrt(1/n_pos + 1/n_neg) / 4 (about 0.0126
    for the ~400 positive of the ~12,400 held-out rows). The model must be 4 of those
    above 1/2. Measured balanced accuracy of the SGD over training seeds 0-3 (the split
    and block order are seeded, so a run is repeatable): 100 components from 100
    hyperplanes 0.52-0.67 (not reliably above chance), 400 from 400 0.60-0.72 (seed 0,
    used here: 0.72), the defaults 1000 from 500 0.62-0.77.
    """
    from conftest import require_data

    w8a = require_data("w8a", "w8a.bz2")
    report, _ = _run_pipeline("featurize_webspam.py", w8a, "--output", tmp_path,
                              "--scheduler", scheduler_address, "--n-components", 400,
                              "--n-hyperplanes", 400, "--chunk-rows", 10000, "--quiet")
    assert report["featurize"]["rows"] == 49749 and report["featurize"]["chunks_written"] == 5
    train = report["train"]
    assert train["classifier"] == "sgd"
    n_test = train["n_test"]
    n_neg = round(train["majority_accuracy"] * n_test)  # the majority class is -1
    n_pos = n_test - n_neg
    assert train["majority_accuracy"] > 0.96 and n_pos > 300  # the imbalanced regime
    chance_sd = np.sqrt(1 / n_pos + 1 / n_neg) / 4
    assert train["balanced_accuracy"] > 0.5 + 4 * chance_sd, train
    assert train["f1"] > 0, train  # "always -1" has no true positive


def test_webspam_pipeline_explains_missing_file(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run([sys.executable, str(REPO_ROOT / "pipelines" / "featurize_webspam.py"),
                          str(tmp_path / "webspam_wc_normalized_unigram.svm.bz2")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "LIBSVM binary data sets page" in run.stderr
