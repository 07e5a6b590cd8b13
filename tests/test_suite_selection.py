"""The fast default set and ``--full`` (tests/suite_selection.py), on inner pytest runs."""

import pytest

pytest_plugins = ["pytester"]

_TESTS = '''
import subprocess, sys

import pytest

RUN = False  # the processes are read, never started (but by the last test)


def _python(*args):
    if RUN:
        return subprocess.run([sys.executable, "-c", "pass", *args], check=True)


@pytest.fixture
def worker_process():
    return _python()


def test_in_process():
    assert 1 + 1 == 2


def test_calls_a_helper_that_starts_a_process():
    _python()


def test_uses_a_fixture_that_starts_a_process(worker_process):
    pass


def test_starts_a_local_cluster():
    from distributed import LocalCluster
    if RUN:
        LocalCluster(n_workers=1)


def test_in_process_cluster_stays_fast():
    from distributed import LocalCluster
    if RUN:
        LocalCluster(n_workers=1, processes=False)


@pytest.mark.slow
def test_marked_slow():
    pass


def test_hides_its_process_from_the_reading():
    getattr(subprocess, "run")([sys.executable, "-c", "pass"], check=True)
'''


@pytest.fixture
def inner(pytester):
    pytester.makeini("[pytest]\nmarkers =\n    slow: s\n    cluster: c\n    data: d\n")
    pytester.makepyfile(test_inner=_TESTS)
    return pytester


def test_fast_run_deselects_what_starts_processes_and_fails_what_hides_one(inner):
    result = inner.runpytest("-p", "suite_selection", "-q", "-rA")
    result.assert_outcomes(passed=3, errors=1, deselected=4)
    result.stdout.fnmatch_lines([
        "*test_hides_its_process_from_the_reading is in the fast set but started a "
        "subprocess*Mark it @pytest.mark.full*",
        "*PASSED test_inner.py::test_in_process",
        "*PASSED test_inner.py::test_in_process_cluster_stays_fast",
    ])


def test_full_runs_everything_and_marks_what_only_it_runs(inner):
    result = inner.runpytest("-p", "suite_selection", "-q", "--full", "-m", "full", "-rA")
    result.assert_outcomes(passed=4, deselected=3)
    result.stdout.fnmatch_lines([
        "*PASSED test_inner.py::test_calls_a_helper_that_starts_a_process*",
        "*PASSED test_inner.py::test_uses_a_fixture_that_starts_a_process*",
        "*PASSED test_inner.py::test_starts_a_local_cluster*",
        "*PASSED test_inner.py::test_marked_slow*",
    ])
    everything = inner.runpytest("-p", "suite_selection", "-q", "--full", "-k", "not hides")
    everything.assert_outcomes(passed=6, deselected=1)


def test_a_module_fixture_overriding_a_process_starting_one_keeps_its_tests_fast(pytester):
    # conftest.py's cluster fixture starts processes; a module that overrides it with an
    # in-process one keeps its tests in the fast set (the fixture they get is the module's)
    pytester.makeini("[pytest]\nmarkers =\n    slow: s\n    cluster: c\n    data: d\n")
    pytester.makeconftest('''
import subprocess, sys

import pytest


@pytest.fixture
def address():
    if False:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    return "a process"
''')
    pytester.makepyfile(test_overrides='''
import pytest


@pytest.fixture
def address():
    return "in process"


def test_gets_the_in_process_fixture(address):
    assert address == "in process"
''', test_inherits='''
def test_gets_the_process_fixture(address):
    assert address == "a process"
''')
    fast = pytester.runpytest("-p", "suite_selection", "-q", "-rA")
    fast.assert_outcomes(passed=1, deselected=1)
    fast.stdout.fnmatch_lines(["*PASSED test_overrides.py::test_gets_the_in_process_fixture"])
