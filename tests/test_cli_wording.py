"""Messages name parameters in the reader's words (issue 29, item 11).

The library says the Python parameter (``chunk_rows=512``), the command line its flag
(``--chunk-rows 512``), and neither the other's: a message naming a parameter is a
:class:`dkrp.errors.Message` whose :class:`~dkrp.errors.Param` parts the CLI spells
with the running command's own options. Real files and stores; the command line runs
in this process (click's CliRunner), refused before any cluster starts, except the
demo, which gets an in-process cluster.
"""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

import dkrp
from dkrp.cli import main
from dkrp.cli._group import cli_wording
from dkrp.errors import FeatureStoreError, FeatureStoreMismatchError, Message, Param

#: ``name=value`` as Python spells a keyword argument
PYTHON_SPELLING = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)*=(?:True|False|'|\[|\d|[A-Z]\b)")


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _refused(r):
    """The command failed with its one-line message, no cluster started."""
    assert r.exit_code == 1, r.output
    assert "dask dashboard" not in r.output and "Traceback" not in r.output
    assert not PYTHON_SPELLING.search(r.output), r.output
    return r.output


def _python_only(message):
    assert "--" not in str(message), message
    return str(message)


@pytest.fixture
def feature_store(tmp_path):
    """A finished 40-row feature store (chunks of 10 rows), made on dask's local scheduler."""
    X = np.random.default_rng(0).uniform(-1, 1, (40, 5))
    np.save(tmp_path / "x.npy", X)
    dkrp.featurize_to_store(tmp_path / "x.npy", tmp_path / "f.zarr",
                            dkrp.PolynomialRandomProjection(n_components=8, n_hyperplanes=16,
                                                            random_state=0),
                            chunk_rows=10, progress=False)
    return tmp_path


# --- the mechanism ------------------------------------------------------------------------


def test_a_message_is_its_python_wording_and_keeps_its_parts_across_pickling():
    clause = Message(", or pass {} to open it", Param("allow_incomplete", True), cli="")
    m = Message("{} has {:.2f}; pass {} or {}{}.", "s.zarr", 0.5, Param("chunk_rows", 512),
                Param("retries", metavar="N"), clause)
    assert m == ("s.zarr has 0.50; pass chunk_rows=512 or retries=N, or pass "
                 "allow_incomplete=True to open it.")
    copy = pickle.loads(pickle.dumps(ValueError(m))).args[0]
    assert isinstance(copy, Message) and copy == m
    assert [p.python() for p in copy.params()] == ["chunk_rows=512", "retries=N",
                                                   "allow_incomplete=True"]
    flags = {"chunk_rows": "--chunk-rows 512", "retries": "--retries N"}
    assert copy.render(lambda p: flags.get(p.name)) == (
        "s.zarr has 0.50; pass --chunk-rows 512 or --retries N.")


def test_a_parameter_without_a_flag_keeps_its_python_spelling_outside_a_clause():
    m = Message("pass {}; it takes {}", Param("download", True),
                Message.join(", ", [Param("degree"), Param("feature_map")]))
    assert m.render(lambda p: "--degree" if p.name == "degree" else None) == (
        "pass download=True; it takes --degree")


def test_flags_come_from_the_commands_own_options():
    ingest, featurize = main.commands["ingest"], main.commands["featurize"]
    said = Message("{} {} {} {} {} {}", Param("zero_based", True), Param("zero_based", False),
                   Param("drop_columns", ["Id", "a b"]), Param("n_features", 300),
                   Param("overwrite", True), Param("label_column"))
    assert cli_wording(said, ingest) == (
        "--zero-based --one-based --drop-column Id --drop-column 'a b' --n-features 300 "
        "--overwrite --label-column")
    said = Message("{} {} {} {}", Param("random_state", 3), Param("scale_rows", "unit"),
                   Param("gamma", "scale"), Param("overwrite", True, command="ingest"))
    assert cli_wording(said, featurize) == "--seed 3 --scale-rows unit --gamma scale --overwrite"
    # export's --to is the option named fmt; the library's parameter is to
    assert cli_wording(Message("{}", Param("to", "npy")), main.commands["export"]) == "--to npy"


# --- "it takes feature_map, ..., random_state" --------------------------------------------


def test_an_option_the_method_does_not_take_is_named_as_python_says_it():
    from dkrp.methods import make_projector

    with pytest.raises(ValueError) as info:
        make_projector("rff", degree=2)
    assert _python_only(info.value) == (
        "Method 'rff' does not take degree; it takes feature_map, gamma, kernel, "
        "n_components, pool, random_state.")


def test_featurize_names_the_flags_a_method_takes(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((4, 3)))
    out = _refused(_cli("featurize", tmp_path / "x.npy", tmp_path / "o.zarr", "--method", "rff",
                        "--n-hyperplanes", 3))
    # feature_map has no flag (set it from Python): it is left out
    assert ("Method 'rff' does not take --n-hyperplanes; it takes --gamma, --kernel, "
            "--n-components, --pool, --seed.") in out
    assert "random_state" not in out and "feature_map" not in out


# --- parameters of a map that do not go together -------------------------------------------


@pytest.mark.parametrize("args, python, flags", [
    (("--pool", "orthogonal", "--distribution", "achlioptas"),
     "pool='orthogonal' builds its own Gaussian-based rows; distribution='achlioptas' applies "
     "to pool='iid' only.",
     "--pool orthogonal builds its own Gaussian-based rows; --distribution achlioptas applies "
     "to --pool iid only."),
    (("--degree", 3, "--n-terms", 400),
     "degree * n_terms must not exceed n_hyperplanes: each component uses degree * n_terms = "
     "1200 distinct pool hyperplanes, but n_hyperplanes = 1000.",
     "--degree * --n-terms must not exceed --n-hyperplanes: each component uses --degree * "
     "--n-terms = 1200 distinct pool hyperplanes, but --n-hyperplanes = 1000."),
    (("--method", "rff", "--kernel", "laplacian", "--pool", "orthogonal"),
     "pool='orthogonal' is defined for kernel='gaussian' only (its rows approximate Gaussian "
     "frequencies); got kernel='laplacian'.",
     "--pool orthogonal is defined for --kernel gaussian only (its rows approximate Gaussian "
     "frequencies); got --kernel laplacian."),
])
def test_options_that_do_not_go_together_are_named_in_each_ones_words(tmp_path, args, python,
                                                                        flags):
    """A user's `dkrp featurize --pool orthogonal --distribution achlioptas` was told
    "pool='orthogonal' ... distribution='achlioptas' applies to pool='iid' only"."""
    from dkrp.methods import make_projector

    names = (a.lstrip("-").replace("-", "_") for a in args[::2])
    options = dict(zip(names, args[1::2], strict=True))
    method = options.pop("method", "krp")
    with pytest.raises(ValueError) as info:
        make_projector(method, **options).fit(np.ones((4, 3)))
    assert _python_only(info.value) == python
    np.save(tmp_path / "x.npy", np.ones((4, 3)))
    out = _refused(_cli("featurize", tmp_path / "x.npy", tmp_path / "o.zarr", *args, "-q"))
    assert flags in " ".join(out.split()), out
    assert not (tmp_path / "o.zarr").exists()


# --- "(chunk_rows=512)" --------------------------------------------------------------------


def _job_plan(action):
    return {"attrs": {"chunk_rows": 4096, "n_components": 1000, "dtype": "float64"},
            "task_memory": 2**30, "action": action, "path": "f.zarr"}


def test_a_task_too_large_for_the_workers_names_the_chunk_rows_to_use():
    from dkrp.jobs import _does_not_fit

    said = _does_not_fit(_job_plan("create"), 2**28, 512)
    assert _python_only(said).endswith(" Use chunk_rows=512 or less.")
    assert cli_wording(said, main.commands["featurize"]).endswith(" Use --chunk-rows 512 or less.")
    resumed = cli_wording(_does_not_fit(_job_plan("resume"), 2**28, 512),
                           main.commands["featurize"])
    assert "(--memory-limit)" in resumed and resumed.endswith("with --chunk-rows 512.")
    assert not PYTHON_SPELLING.search(resumed) and "memory_limit" not in resumed


def test_resuming_with_other_chunk_rows_is_refused_in_python_words(feature_store):
    with pytest.raises(FeatureStoreMismatchError) as info:
        dkrp.featurize_to_store(feature_store / "x.npy", feature_store / "f.zarr",
                                dkrp.PolynomialRandomProjection(
                                    n_components=8, n_hyperplanes=16, random_state=0),
                                chunk_rows=20, progress=False)
    said = _python_only(info.value)
    assert "but chunk_rows=20 was given" in said
    assert "without chunk_rows or with chunk_rows=10" in said and "pass overwrite=True" in said


def test_featurize_refuses_other_chunk_rows_in_flags(feature_store):
    args = ["featurize", feature_store / "x.npy", feature_store / "f.zarr", "--n-components", 8,
            "--n-hyperplanes", 16, "--chunk-rows", 20]
    out = _refused(_cli(*args, "--seed", 0))
    assert "but --chunk-rows 20 was given" in out
    assert "without --chunk-rows or with --chunk-rows 10" in out and "pass --overwrite" in out
    assert "chunk_rows" not in out
    dry = _cli(*args, "--seed", 0, "--dry-run")
    assert dry.exit_code == 0 and "The real run would stop:" in dry.output, dry.output
    assert "--chunk-rows 10" in dry.output and "chunk_rows" not in dry.output


# --- "allow_incomplete=True" ---------------------------------------------------------------


def _mark_incomplete(store):
    zarr.open_group(str(store), mode="r+").attrs["complete"] = False


def test_an_incomplete_store_offers_allow_incomplete_from_python(feature_store):
    from dkrp.feature_store import open_features

    _mark_incomplete(feature_store / "f.zarr")
    with pytest.raises(FeatureStoreError) as info:
        open_features(feature_store / "f.zarr")
    assert _python_only(info.value).endswith(
        "Run the same featurize command again to write the missing chunks, or pass "
        "allow_incomplete=True to inspect it.")
    dkrp.io.ingest(feature_store / "x.npy", feature_store / "x.zarr")
    _mark_incomplete(feature_store / "x.zarr")
    with pytest.raises(ValueError) as info:
        dkrp.io.open_dataset(feature_store / "x.zarr")
    assert _python_only(info.value).endswith(
        "re-run it with overwrite=True to rebuild the store, or pass allow_incomplete=True "
        "to open it anyway.")


def test_the_command_line_points_at_dkrp_info_instead(feature_store):
    _mark_incomplete(feature_store / "f.zarr")
    out = _refused(_cli("export", feature_store / "f.zarr", feature_store / "z.npy",
                        "--to", "npy"))
    assert out.rstrip().endswith("write the missing chunks (dkrp info shows how far it got).")
    assert "allow_incomplete" not in out
    dkrp.io.ingest(feature_store / "x.npy", feature_store / "x.zarr")
    _mark_incomplete(feature_store / "x.zarr")
    # featurize has no flag to rebuild a dataset store: the --overwrite is ingest's
    out = _refused(_cli("featurize", feature_store / "x.zarr", feature_store / "g.zarr"))
    assert out.rstrip().endswith(
        "re-run it with --overwrite to rebuild the store (dkrp info shows how far it got).")


# --- "scale_rows='unit'" -------------------------------------------------------------------


@pytest.fixture
def sparse_store(tmp_path):
    (tmp_path / "s.svm").write_text("".join(f"{i % 2} 1:0.5 4:{i / 100}\n" for i in range(40)))
    dkrp.io.ingest(tmp_path / "s.svm", tmp_path / "s.zarr", sparse=True)
    return tmp_path / "s.zarr"


def test_standardizing_sparse_input_is_refused_in_python_words(tmp_path, sparse_store):
    with pytest.raises(ValueError) as info:
        dkrp.featurize_to_store(sparse_store, tmp_path / "o.zarr",
                                dkrp.PolynomialRandomProjection(n_components=4),
                                standardize=True, progress=False)
    assert _python_only(info.value) == (
        "standardize=True centres every column, which would make sparse input dense. Use "
        "scale_rows='unit', or ingest the data densely (dkrp.io.ingest(..., sparse=False)).")


def test_featurize_refuses_standardizing_sparse_input_in_flags(tmp_path, sparse_store):
    out = _refused(_cli("featurize", sparse_store, tmp_path / "o.zarr", "--standardize"))
    assert ("--standardize centres every column, which would make sparse input dense. Use "
            "--scale-rows unit, or ingest the data densely (dkrp ingest --dense).") in out
    assert "scale_rows" not in out and "sparse=False" not in out


# --- "Pass download=True" ------------------------------------------------------------------


@pytest.fixture
def no_covtype(tmp_path, monkeypatch):
    """Neither dkrp's data folder nor scikit-learn's cache holds Covertype."""
    monkeypatch.setenv("DKRP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path / "sklearn"))


def test_a_missing_dataset_offers_download_from_python(no_covtype):
    from dkrp.datasets import DatasetNotFoundError, load_covtype

    with pytest.raises(DatasetNotFoundError) as info:
        load_covtype()
    assert " Pass download=True to let scikit-learn download it. (scikit-learn: " in (
        _python_only(info.value))


@pytest.fixture(scope="module")
def scheduler_address():
    from dkrp.parallel import start_local_cluster

    with start_local_cluster(n_workers=1, threads_per_worker=1, processes=False) as cluster:
        yield cluster.scheduler_address


def test_the_demo_does_not_offer_a_download_it_has_no_flag_for(no_covtype, scheduler_address):
    out = _refused(_cli("demo", "--dataset", "covtype", "--scheduler", scheduler_address,
                        "--quiet"))
    assert "covtype (train) not found" in out and "Could not reach" not in out
    # nor scikit-learn's own parameter: "(scikit-learn: ... `download_if_missing` is False)"
    assert "download" not in out and "scikit-learn:" not in out


def test_the_demo_says_its_data_are_missing_before_starting_a_cluster(no_covtype):
    # it started the embedded cluster (9 s of worker start-up) before loading the data
    out = _refused(_cli("demo", "--dataset", "covtype"))  # no dashboard line: no cluster
    assert "covtype (train) not found" in out


# --- what the library says to other commands ----------------------------------------------


def test_ingest_says_its_own_flags(tmp_path):
    (tmp_path / "stray.svm").write_text("".join(
        f"1 {'0' if i == 3 else '1'}:0.5 2:1\n" for i in range(10)))
    out = _refused(_cli("ingest", tmp_path / "stray.svm", tmp_path / "s.zarr"))
    assert "Pass --zero-based if indices start at 0, or --one-based if they start at 1" in out
    np.save(tmp_path / "x.npy", np.ones((4, 3)))
    out = _refused(_cli("ingest", tmp_path / "x.npy", tmp_path / "x.zarr", "--n-features", 5))
    assert ": --n-features 5 but the array has 3 columns" in out
    assert _cli("ingest", tmp_path / "x.npy", tmp_path / "x.zarr").exit_code == 0
    out = _refused(_cli("ingest", tmp_path / "x.npy", tmp_path / "x.zarr"))
    assert "already exists; pass --overwrite to replace it" in out


def test_the_library_says_python_to_ingest_callers(tmp_path):
    (tmp_path / "stray.svm").write_text("".join(
        f"1 {'0' if i == 3 else '1'}:0.5 2:1\n" for i in range(10)))
    with pytest.raises(ValueError) as info:
        dkrp.io.ingest(tmp_path / "stray.svm", tmp_path / "s.zarr")
    assert ("Pass zero_based=True if indices start at 0, or zero_based=False if they start "
            "at 1") in _python_only(info.value)
    (tmp_path / "c.csv").write_text("Id,a\n1,0.5\n2,oops\n")
    with pytest.raises(ValueError) as info:
        dkrp.io.ingest(tmp_path / "c.csv", tmp_path / "c.zarr")
    assert _python_only(info.value).endswith("leave the column out with drop_columns=['a'].")


def test_a_failed_partition_offers_retries_in_each_ones_words(tmp_path):
    from dkrp.feature_store.tasks import _partition_failure

    exc = _partition_failure(OSError("disk gone"), 3, (30, 39), tmp_path / "f.zarr", 1)
    assert str(exc).endswith(" (or pass retries=N if the error is transient).")
    assert cli_wording(pickle.loads(pickle.dumps(exc)).args[0],
                        main.commands["featurize"]).endswith(
        " (or pass --retries N if the error is transient).")


# --- leftovers -----------------------------------------------------------------------------


def _library_modules():
    root = Path(dkrp.__file__).parent
    return [p for p in sorted(root.rglob("*.py")) if "cli" not in p.relative_to(root).parts]


def _params_named(tree):
    """(name, command, inside a clause with its own cli text) of each literal Param(...)."""
    found = []

    def visit(node, clause):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Message":
            clause = clause or any(k.arg in ("cli", "python") for k in node.keywords)
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Param"
                and node.args and isinstance(node.args[0], ast.Constant)):
            command = next((k.value.value for k in node.keywords if k.arg == "command"), None)
            found.append((node.args[0].value, command, clause, node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child, clause)

    visit(tree, False)
    return found


def test_every_parameter_a_message_names_is_a_flag_of_some_command():
    from dkrp.cli._group import _flag

    named = 0
    for path in _library_modules():
        for name, command, clause, line in _params_named(ast.parse(path.read_text())):
            named += 1
            commands = [main.commands[command]] if command else main.commands.values()
            flags = {_flag(c, Param(name)) for c in commands} - {None}
            # a parameter the command line lacks is named only inside a clause that says
            # something else there (cli=...) or says it otherwise from Python (python=...)
            assert flags or clause, f"{path.name}:{line}: Param({name!r}) has no flag"
    assert named >= 40


def test_library_errors_name_no_flags():
    """A raise outside dkrp.cli spells no --flag (a whole `dkrp ...` command line may)."""
    flag = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
    found = []
    for path in _library_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Raise) and node.exc is not None):
                continue
            for part in ast.walk(node.exc):
                if (isinstance(part, ast.Constant) and isinstance(part.value, str)
                        and flag.search(part.value) and "dkrp " not in part.value):
                    found.append(f"{path.name}:{part.lineno}: {part.value!r}")
    assert not found, "\n".join(found)
