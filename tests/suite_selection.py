"""Which tests belong to the fast default run and which only to ``pytest --full``.

The README's ``pytest -q`` is a newcomer's first run and every developer's edit-and-test
loop, so it must stay fast: it runs in this process, with the threaded scheduler and an
in-process distributed cluster. Everything that starts processes (worker-process
clusters, ``dkrp`` in a subprocess, kill-and-resume, TLS schedulers), runs experiments or
reads the real datasets runs with ``--full`` (CI runs that).

A test is in the full suite when

* it carries one of :data:`FULL_MARKS` (``slow``, ``cluster``, ``data``, ``slurm`` or
  ``full``), or
* :func:`function_reasons` finds that it, a fixture it uses or a function it calls
  (transitively, within its module and ``conftest.py``) starts a process (``subprocess``,
  ``Popen``, a ``LocalCluster`` / ``start_local_cluster`` without ``processes=False``,
  ``multiprocessing``, ``scheduler="processes"``) or reads the real datasets
  (``require_data``, ``real_data_root``, ``data_dir``).

So a new test cannot slip into the fast set by forgetting a mark; and when the static
reading misses a process (a library call that starts a cluster inside), the fast run's
guard (:func:`install_process_guard`) fails the test, naming it.
"""

from __future__ import annotations

import ast
import functools
import inspect
import multiprocessing.process
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

#: Marks that put a test in the full suite only.
FULL_MARKS = ("full", "slow", "cluster", "data", "slurm")

_SUBPROCESS_CALLS = {"run", "Popen", "call", "check_call", "check_output"}
_PROCESS_CONSTRUCTORS = {"Popen", "Process", "ProcessPoolExecutor", "Pool", "SpecCluster",
                         "SLURMCluster"}
_CLUSTERS = {"LocalCluster", "start_local_cluster"}
#: Calls that read the shared real datasets (tests/conftest.py's helpers, dkrp.datasets).
_DATA_CALLS = {"require_data", "real_data_root", "data_dir"}


def _call_name(func) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _keyword(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _starts_process_directly(call: ast.Call) -> bool:
    name = _call_name(call.func)
    if (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "subprocess" and name in _SUBPROCESS_CALLS):
        return True
    if name in _PROCESS_CONSTRUCTORS:
        return True
    if name in _CLUSTERS:
        processes = _keyword(call, "processes")
        # LocalCluster's default is worker processes
        return not (isinstance(processes, ast.Constant) and processes.value is False)
    scheduler = _keyword(call, "scheduler")
    return isinstance(scheduler, ast.Constant) and scheduler.value == "processes"


def _direct_kinds(call: ast.Call) -> set:
    kinds = set()
    if _starts_process_directly(call):
        kinds.add("starts a process")
    if _call_name(call.func) in _DATA_CALLS:
        kinds.add("reads the real datasets")
    return kinds


@functools.lru_cache(maxsize=None)
def _module_graph(path: str) -> tuple[dict, dict]:
    """``(direct, calls)`` for every function of the module at ``path`` (methods too,
    by their bare name): what its body does itself (a set of reasons), and the bare
    names it calls or takes as arguments (fixtures)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        functions += [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    direct: dict[str, set] = {}
    calls: dict[str, set] = {}
    for node in functions:
        # nested functions count as their enclosing one; attribute calls (obj.get())
        # never name a module-level function
        names = {a.arg for a in node.args.args + node.args.kwonlyargs}
        found = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                found |= _direct_kinds(sub)
            elif isinstance(sub, ast.Name):
                names.add(sub.id)  # a call, or a helper passed by name (to a thread, map)
        direct.setdefault(node.name, set()).update(found)
        calls.setdefault(node.name, set()).update(names)
    return direct, calls


@functools.lru_cache(maxsize=None)
def _module_reasons(path: str) -> dict:
    """``{function name: reasons}`` for the functions of ``path`` that start a process
    or read the real data, themselves or through a function of the same module or of
    ``tests/conftest.py``."""
    direct, calls = _module_graph(path)
    conftest = str(Path(__file__).with_name("conftest.py"))
    if path != conftest:
        c_direct, c_calls = _module_graph(conftest)
        direct = {**{k: v for k, v in c_direct.items() if k not in direct}, **direct}
        calls = {**{k: v for k, v in c_calls.items() if k not in calls}, **calls}
    reasons = {name: set(found) for name, found in direct.items()}
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            for callee in called & reasons.keys():
                if callee != name and not reasons[callee] <= reasons[name]:
                    reasons[name] |= reasons[callee]
                    changed = True
    return {name: frozenset(r) for name, r in reasons.items() if r}


def function_reasons(func) -> frozenset:
    """Why the function ``func`` (a test or a fixture) belongs to the full suite, by
    reading its module's source: empty when it neither starts a process nor reads the
    real datasets."""
    func = inspect.unwrap(func)
    try:
        path = inspect.getsourcefile(func)
    except TypeError:
        return frozenset()
    if not path or not path.endswith(".py") or not os.path.isfile(path):
        return frozenset()
    return _module_reasons(os.path.abspath(path)).get(func.__name__, frozenset())


def belongs_to_full_suite(item) -> str | None:
    """Why ``item`` runs only with ``--full`` (a short reason), or None."""
    for mark in FULL_MARKS:
        if item.get_closest_marker(mark) is not None:
            return f"marked {mark}"
    function = getattr(item, "function", None)
    reasons = function_reasons(function) if function is not None else frozenset()
    if reasons:
        return " and ".join(sorted(reasons))
    info = getattr(item, "_fixtureinfo", None)
    for name, defs in (info.name2fixturedefs.items() if info else ()):
        # the last definition is the one the test gets: a module's in-process fixture
        # overriding conftest.py's process-starting one of the same name keeps it fast
        reasons = function_reasons(defs[-1].func) if defs else frozenset()
        if reasons:
            return f"fixture {name!r} " + " and ".join(sorted(reasons))
    return None


_ORIGINALS = (multiprocessing.process.BaseProcess.start, subprocess.Popen.__init__)


class ProcessGuard:
    """Records the worker processes a fast test starts (Python subprocesses and
    ``multiprocessing`` children, which is how distributed's nannies start workers)."""

    def __init__(self):
        self.started: list[str] = []
        self._lock = threading.Lock()

    def record(self, what: str):
        with self._lock:
            self.started.append(what)

    def take(self) -> list[str]:
        with self._lock:
            started, self.started = self.started, []
        return started


def install_process_guard() -> ProcessGuard:
    """Wrap ``multiprocessing``'s process start and ``subprocess.Popen`` of a Python
    interpreter so that each records itself in the returned guard."""
    guard = ProcessGuard()
    installed = (multiprocessing.process.BaseProcess.start, subprocess.Popen.__init__)
    # the originals, not what is installed: an inner pytest run (pytester) records its
    # processes in its own guard only
    start, popen_init = _ORIGINALS

    def guarded_start(self, *args, **kwargs):
        guard.record(f"a multiprocessing child ({self.name})")
        return start(self, *args, **kwargs)

    def guarded_init(self, args, *rest, **kwargs):
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        program = os.path.basename(os.fsdecode(argv[0])) if argv else ""
        if program.startswith(("python", "dask", "dkrp")) or (
                argv and os.fsdecode(argv[0]) == sys.executable):
            guard.record(f"a subprocess {' '.join(map(os.fsdecode, argv))[:120]!r}")
        return popen_init(self, args, *rest, **kwargs)

    def uninstall():
        multiprocessing.process.BaseProcess.start, subprocess.Popen.__init__ = installed

    multiprocessing.process.BaseProcess.start = guarded_start
    subprocess.Popen.__init__ = guarded_init
    guard.uninstall = uninstall
    return guard


# -- the pytest plugin (tests/conftest.py loads it) ------------------------------------------


def pytest_addoption(parser):
    parser.addoption(
        "--full", action="store_true", default=os.environ.get("DKRP_FULL_TESTS") == "1",
        help="run the full suite (what CI runs): worker-process clusters, kill and resume, "
             "dkrp in subprocesses, experiments, SRF sweeps and the real datasets. Without "
             "it, only the fast in-process set runs (also DKRP_FULL_TESTS=1).")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "full: runs only with --full (set automatically on tests that start "
                   "processes; see tests/suite_selection.py)")
    config.dkrp_process_guard = None if config.getoption("--full") else install_process_guard()


def pytest_unconfigure(config):
    guard = getattr(config, "dkrp_process_guard", None)
    if guard is not None:
        guard.uninstall()


@pytest.hookimpl(tryfirst=True)  # before -m reads the marks (e.g. -m full: the rest)
def pytest_collection_modifyitems(config, items):
    full = config.getoption("--full")
    deselected = []
    for item in items:
        reason = belongs_to_full_suite(item)
        if reason is None:
            continue
        item.add_marker(pytest.mark.full(reason=reason))
        if not full:
            deselected.append(item)
    if deselected:
        chosen = set(map(id, deselected))
        items[:] = [item for item in items if id(item) not in chosen]
        config.hook.pytest_deselected(items=deselected)


def pytest_report_header(config):
    if not config.getoption("--full"):
        return ("dkrp: the fast set (in-process). The full suite: pytest --full "
                "(worker processes, subprocess CLI, experiments, real data)")
    return "dkrp: the full suite"


@pytest.fixture(autouse=True)
def _fast_tests_start_no_process(request):
    """In the fast set, a test that starts a worker process fails, naming what it started:
    the static reading of tests/suite_selection.py missed it, so mark it ``full``."""
    guard = request.config.dkrp_process_guard
    if guard is None:
        yield
        return
    guard.take()
    yield
    started = guard.take()
    if started:
        pytest.fail(
            f"{request.node.nodeid} is in the fast set but started {started[0]} "
            f"({len(started)} process(es) in all). Mark it @pytest.mark.full (or make it "
            "use the in-process cluster) so that the README's pytest -q stays fast.",
            pytrace=False)
