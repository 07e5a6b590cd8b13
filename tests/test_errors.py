"""One error root (issue 31, item 3): every exception dkrp defines is a DkrpError that keeps
its builtin base; users' mistakes through the public API raise one; the command line prints
a DkrpError as one line and shows the traceback of anything else (a bug)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import numpy as np
import pytest
from click.testing import CliRunner

import dkrp
from dkrp.cli import main
from dkrp.errors import (
    CapacityError,
    CorruptStoreError,
    DkrpError,
    InvalidInputError,
    InvalidTypeError,
    SpecError,
)

#: modules that act when imported (``python -m dkrp`` runs the command line)
_NOT_IMPORTED = {"dkrp.__main__"}


def _dkrp_exception_classes():
    classes = set()
    for info in pkgutil.walk_packages(dkrp.__path__, "dkrp."):
        if info.name in _NOT_IMPORTED:
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (issubclass(cls, BaseException) and not issubclass(cls, Warning)
                    and cls.__module__.split(".")[0] == "dkrp"):
                classes.add(cls)
    return classes


def test_every_exception_class_of_dkrp_is_a_dkrp_error():
    classes = _dkrp_exception_classes()
    # the walk sees the classes of dkrp.errors and the one that lived elsewhere
    assert {SpecError, CorruptStoreError, dkrp.datasets.DatasetNotFoundError} <= classes
    outside = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes
                     if not issubclass(c, DkrpError))
    assert outside == [], f"exception classes outside the DkrpError root: {outside}"


@pytest.mark.parametrize(("name", "builtin"), [
    ("SpecError", ValueError), ("StoreError", RuntimeError),
    ("FeatureStoreError", RuntimeError), ("FeatureStoreMismatchError", ValueError),
    ("PartitionError", RuntimeError), ("PartitionInputError", ValueError),
    ("ChunkError", ValueError), ("CorruptStoreError", ValueError),
    ("ClusterError", RuntimeError), ("VoterError", RuntimeError),
    ("InvalidInputError", ValueError), ("InvalidTypeError", TypeError),
    ("InputChangedError", RuntimeError), ("CapacityError", MemoryError),
    ("MissingDependencyError", ImportError), ("DatasetNotFoundError", FileNotFoundError),
])
def test_each_class_keeps_its_builtin_base(name, builtin):
    cls = getattr(dkrp.errors, name)
    assert issubclass(cls, DkrpError) and issubclass(cls, builtin)


def test_the_roots_are_public_names():
    assert {"DkrpError", "InvalidInputError", "CapacityError"} <= set(dkrp.__all__)
    assert dkrp.DkrpError is DkrpError and dkrp.CapacityError is CapacityError


# -- users' mistakes through the public API --------------------------------------------------


def _rows(n=20, d=4):
    return np.random.default_rng(0).standard_normal((n, d))


def _nan_rows():
    X = _rows()
    X[7, 2] = np.nan
    return X


def _fitted():
    return dkrp.RandomFourierFeatures(n_components=8, random_state=0).fit(_rows())


def _corrupt_store(small_store):
    (small_store / "X" / "zarr.json").unlink()
    from dkrp.io import open_dataset

    open_dataset(small_store)


def _incomplete_store(small_store):
    import zarr

    zarr.open_group(str(small_store), mode="r+").attrs["complete"] = False
    from dkrp.io import open_dataset

    open_dataset(small_store)


@pytest.mark.parametrize(("mistake", "builtin", "match"), [
    # dkrp's own checks
    (lambda _: dkrp.RandomFourierFeatures(n_components=8).fit(_nan_rows()), ValueError,
     r"Input X contains NaN \(at row 7\)"),
    (lambda _: _fitted().transform(_nan_rows()), ValueError, "contains NaN"),
    (lambda _: dkrp.RandomFourierFeatures(n_components=0).fit(_rows()), ValueError,
     "n_components must be >= 1"),
    (lambda _: dkrp.PolynomialRandomProjection(degree="two").fit_n_features(3), ValueError,
     "degree must be an integer"),
    (lambda _: dkrp.from_spec({"format": "dkrp.projector"}), ValueError,
     "Unsupported spec format_version"),
    (_corrupt_store, ValueError, r"x\.zarr is corrupt: member 'X' is missing"),
    (_incomplete_store, ValueError, r"x\.zarr is incomplete: its ingest did not finish"),
    # scikit-learn's checks inside dkrp's entry points, their message kept
    (lambda _: _fitted().transform(_rows(d=5)), ValueError,
     "X has 5 features, but RandomFourierFeatures is expecting 4 features as input"),
    (lambda _: dkrp.RandomFourierFeatures(n_components=8).fit(np.ones(5)), ValueError,
     "Expected 2D array, got 1D array instead"),
    (lambda _: dkrp.PrimalLinearSVC().fit(_nan_rows(), np.arange(20) % 2), ValueError,
     "Input X contains NaN"),
    (lambda _: dkrp.PrimalLinearSVC().fit(_rows(), np.linspace(0, 1, 20)), ValueError,
     "Unknown label type"),
    (lambda _: dkrp.PrimalLinearSVC().fit(__import__("scipy.sparse").sparse.csr_matrix(
        _rows()), np.arange(20) % 2), TypeError, "dense data is required"),
], ids=["nan-fit", "nan-transform", "n_components", "degree", "spec", "corrupt-store",
        "incomplete-store", "feature-count", "1-d", "svm-nan", "svm-labels", "svm-sparse"])
def test_a_users_mistake_is_a_dkrp_error_and_the_legacy_builtin(small_store, mistake, builtin,
                                                                 match):
    with pytest.raises(DkrpError, match=match) as info:
        mistake(small_store)
    assert isinstance(info.value, builtin)
    copy = pickle.loads(pickle.dumps(info.value))  # it may cross process boundaries
    assert type(copy) is type(info.value) and str(copy) == str(info.value)


def test_sklearn_errors_keep_their_message_and_cause():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(InvalidInputError) as info:
        _fitted().transform(_rows(d=5))
    assert type(info.value.__cause__) is ValueError
    assert str(info.value) == str(info.value.__cause__)
    with pytest.raises(InvalidTypeError):
        dkrp.PrimalLinearSVC().fit(__import__("scipy.sparse").sparse.csr_matrix(_rows()),
                                   np.arange(20) % 2)
    with pytest.raises(NotFittedError):  # scikit-learn's own subclass passes as it is
        dkrp.PrimalLinearSVC().decision_function(_rows())


def test_an_output_larger_than_the_disk_is_a_capacity_error(tmp_path):
    import dask.array as da

    X = da.zeros((10**12, 4), chunks=(10**6, 4))  # nothing of it is ever computed
    with pytest.raises(CapacityError, match="more than the .* free at") as info:
        dkrp.featurize_to_store(X, tmp_path / "z.zarr",
                                dkrp.RandomFourierFeatures(n_components=512).fit_n_features(4),
                                progress=False)
    assert isinstance(info.value, MemoryError)
    assert not (tmp_path / "z.zarr").exists()


# -- the command line: a DkrpError is one line, anything else a bug with its traceback -------


@pytest.fixture
def planted_command():
    """A command on dkrp's group that raises what the test gives it."""
    box = {}

    @main.command("planted-error-test", hidden=True)
    def planted():
        raise box["error"]

    try:
        yield box
    finally:
        main.commands.pop("planted-error-test")


def test_cli_prints_a_dkrp_error_as_one_line(planted_command):
    planted_command["error"] = InvalidInputError("n_components must be >= 1, got 0.")
    r = CliRunner().invoke(main, ["planted-error-test"])
    assert r.exit_code == 1
    assert r.output == "Error: n_components must be >= 1, got 0.\n"


def test_cli_shows_the_traceback_of_a_bug(planted_command):
    planted_command["error"] = ValueError("planted bug")
    r = CliRunner().invoke(main, ["planted-error-test"])
    assert r.exit_code == 1
    assert "Traceback (most recent call last)" in r.output and "def planted" not in r.output
    assert "raise box[\"error\"]" in r.output, r.output
    last = r.output.strip().splitlines()[-1]
    assert last.startswith("Error: ValueError: planted bug") and "report it" in last


def test_cli_ctrl_c_is_still_aborted(planted_command):
    planted_command["error"] = KeyboardInterrupt()
    r = CliRunner().invoke(main, ["planted-error-test"])
    assert r.exit_code == 1 and r.output.strip() == "Aborted!"


def test_as_click_errors_lets_a_bug_through():
    import click

    from dkrp.cli._group import as_click_errors

    with pytest.raises(click.ClickException, match="^bad input$"):
        with as_click_errors():
            raise InvalidInputError("bad input")
    with pytest.raises(click.ClickException, match="No such file"):
        with as_click_errors():
            open("/nonexistent/dkrp-test-file")
    with pytest.raises(ValueError, match="planted bug"):  # not a ClickException
        with as_click_errors():
            raise ValueError("planted bug")


def test_cli_reports_a_corrupt_dataset_store_in_one_line(small_store, tmp_path):
    (small_store / "X" / "zarr.json").unlink()
    r = CliRunner().invoke(main, ["featurize", str(small_store), str(tmp_path / "z.zarr"),
                                  "--n-components", "8", "--quiet"])
    assert r.exit_code == 1
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert "is corrupt: member 'X' is missing" in r.output
