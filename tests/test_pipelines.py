"""The pipeline scripts, run as a user runs them (subprocess) against a real cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    from conftest import require_data

    w8a = require_data("w8a", "w8a.bz2")
    report, _ = _run_pipeline("featurize_webspam.py", w8a, "--output", tmp_path,
                              "--scheduler", scheduler_address, "--n-components", 100,
                              "--n-hyperplanes", 100, "--chunk-rows", 10000, "--quiet")
    assert report["featurize"]["rows"] == 49749 and report["featurize"]["chunks_written"] == 5
    assert report["train"]["classifier"] == "sgd"
    assert report["train"]["accuracy"] > 0.9 and 0 <= report["train"]["f1"] <= 1


def test_webspam_pipeline_explains_missing_file(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run([sys.executable, str(REPO_ROOT / "pipelines" / "featurize_webspam.py"),
                          str(tmp_path / "webspam_wc_normalized_unigram.svm.bz2")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "LIBSVM binary data sets page" in run.stderr
