"""``dkrp experiment``: the framework (outputs, safety, report) and each experiment at ``quick``."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from dkrp.cli import main
from dkrp.experiments import EXPERIMENTS, get_experiment
from dkrp.experiments._outputs import MARKER, run_and_write
from dkrp.experiments._protocol import Experiment
from dkrp.experiments.report import verdict


def _toy(name="toy", fail_after=None):
    def run(ctx):
        for i, seed in enumerate(ctx.seeds()):
            if fail_after is not None and i >= fail_after:
                raise RuntimeError("planted failure")
            yield {"method": "m", "k": ctx.params["k"], "seed": seed, "score": float(seed)}

    return Experiment(name=name, title="toy", profiles={"quick": {"k": 3, "repeats": 3},
                                                        "full": {"k": 9}},
                      run=run, config_columns=("method", "k"), metric_columns=("score",))


def test_outputs_record_every_run_with_versions_and_a_summary(tmp_path):
    folder = run_and_write(_toy(), output=tmp_path)
    with open(folder / "runs.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["seed"] for r in rows] == ["0", "1", "2"]
    for key in ("dkrp", "numpy", "sklearn", "machine", "profile", "experiment"):
        assert rows[0][key], key
    summary = (folder / "summary.md").read_text()
    # mean and sample std of 0, 1, 2
    assert "| m | 3 | 1.0000 ± 1.0000 | 3 |" in summary
    meta = json.loads((folder / MARKER).read_text())
    assert meta["repeats"] == 3 and meta["params"] == {"k": 3, "repeats": 3}


def test_overrides_and_repeats(tmp_path):
    folder = run_and_write(_toy(), output=tmp_path, repeats=2, overrides={"k": 5}, seed=7)
    with open(folder / "runs.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["k"], r["seed"]) for r in rows] == [("5", "7"), ("5", "8")]
    with pytest.raises(ValueError, match="no parameter 'kk'"):
        run_and_write(_toy(), output=tmp_path, overrides={"kk": 5})


def test_a_failed_run_leaves_nothing_that_looks_complete(tmp_path):
    done = run_and_write(_toy(), output=tmp_path)
    before = (done / "runs.csv").read_bytes()
    with pytest.raises(RuntimeError, match="planted failure"):
        run_and_write(_toy(fail_after=1), output=tmp_path)
    # the completed folder from before is untouched; the failure's rows sit in a hidden
    # .partial folder without a marker
    assert (done / "runs.csv").read_bytes() == before
    partial = [p for p in tmp_path.iterdir() if p.name.startswith(".toy.partial")]
    assert len(partial) == 1 and not (partial[0] / MARKER).exists()


def test_a_folder_dkrp_did_not_write_is_never_replaced(tmp_path):
    mine = tmp_path / "toy"
    mine.mkdir()
    (mine / "notes.txt").write_text("a user's file")
    with pytest.raises(FileExistsError, match="not written by `dkrp experiment`"):
        run_and_write(_toy(), output=tmp_path)
    assert (mine / "notes.txt").read_text() == "a user's file"


@pytest.mark.parametrize(
    "paper, paper_std, mean, std, metric, expected",
    [
        (0.059, 0.007, 0.070, 0.004, "distortion", "agrees"),   # 0.011 <= 2 * 0.0081
        (0.059, 0.007, 0.080, 0.004, "distortion", "differs"),  # 0.021 > 0.0161
        (96.95, None, 96.60, 0.0, "accuracy", "agrees"),        # 0.35 <= 0.5 points
        (96.95, None, 96.40, 0.0, "accuracy", "differs"),
        (0.187, None, 0.200, 0.0, "distortion", "agrees"),      # 7 % <= 10 %
        (0.187, None, 0.210, 0.0, "distortion", "differs"),
    ],
)
def test_verdict_bands(paper, paper_std, mean, std, metric, expected):
    assert verdict(paper, paper_std, mean, std, metric) == expected


def test_every_registered_experiment_is_defined():
    for name in EXPERIMENTS:
        try:
            experiment = get_experiment(name)
        except ModuleNotFoundError:
            pytest.skip(f"{name}: not built yet")
        assert experiment.name == name
        assert set(experiment.profiles) == {"quick", "full"}


def test_cli_lists_and_refuses_unknown_settings(tmp_path):
    runner = CliRunner()
    listed = runner.invoke(main, ["experiment", "--list"])
    assert listed.exit_code == 0 and "distortion" in listed.output
    bad = runner.invoke(main, ["experiment", "distortion", "--local", "--output", str(tmp_path),
                               "--set", "nope=1"])
    assert bad.exit_code != 0 and "has no parameter 'nope'" in bad.output


@pytest.mark.data
def test_distortion_quick_through_the_cli(tmp_path):
    result = CliRunner().invoke(main, ["experiment", "distortion", "--local", "-q",
                                       "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "distortion"
    with open(folder / "runs.csv") as fh:
        rows = list(csv.DictReader(fh))
    by_method = {r["method"]: float(r["distortion"]) for r in rows}
    assert set(by_method) == {"krp-gaussian", "krp-sparse-s3", "kg-rp", "nystroem"}
    # Table 2's ordering at k=200, p=244: KRP (0.120) well below KG-RP (0.329)
    assert by_method["krp-gaussian"] < by_method["kg-rp"]
    assert (folder / "distortion_mnist_g2.png").stat().st_size > 10_000


@pytest.mark.data
@pytest.mark.slow
def test_classification_quick_through_the_cli(tmp_path):
    result = CliRunner().invoke(main, ["experiment", "classification", "--local", "-q",
                                       "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "classification"
    with open(folder / "runs.csv") as fh:
        rows = list(csv.DictReader(fh))
    accuracy = {r["method"]: float(r["accuracy"]) for r in rows}
    assert set(accuracy) == {"linear-svm-raw", "krp-gaussian", "nystroem"}
    assert {r["n_train"] for r in rows} == {"3000"}  # the same rows for every model
    # Table 4 / §4.1.2: degree-2 features lift a linear SVM over the raw pixels (exact
    # <x, y>^2 SVM 97.84 % vs linear 91.81 %; KRP k=1500 96.95 %, Nystrom 97.67 %): ~5
    # points on 60k rows. On 3,000 rows the exact poly SVM's own lead is smaller (~3-4
    # points) and k=500 keeps part of it; the raw SVM here uses the features' C = 0.01, its
    # best on these rows. One point is ~1.5 standard deviations of a paired difference of
    # accuracies on 2,000 test rows (sqrt(~8 % discordant / 2000) ~ 0.6 point) and a
    # fifth of the paper's gap. A map that lost the degree (linear RP) scores below raw.
    assert accuracy["krp-gaussian"] >= accuracy["linear-svm-raw"] + 1.0
    assert accuracy["nystroem"] >= accuracy["linear-svm-raw"] + 1.0
    assert (folder / "classification_mnist.png").stat().st_size > 10_000
