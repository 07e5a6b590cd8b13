"""Shared helpers for the benchmarks: timing, machine description, the MNIST-shaped input,
peak worker memory on a cluster, and the one writer of ``benchmarks/RESULTS.md``.

RESULTS.md holds the latest figures of each benchmark (history is in git): every benchmark
owns one section between ``<!-- section: NAME -->`` and ``<!-- end section -->``, and
``--write-results`` replaces that section, or appends it when the file has none yet. What
stands before the first section (a short hand-written introduction) is never touched.
Each section's header is generated: the full command that reproduces it (every option
with its value, defaults included), the date, the machine, the software versions, the
thread pools and the load average at the start and the end of the run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shlex
import subprocess
import threading
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from dkrp.datasets import data_dir  # the one data-folder lookup (DKRP_DATA_DIR, ../shared/data)
from dkrp.io import read_idx  # the one IDX parser

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_MD = Path(__file__).with_name("RESULTS.md")

#: Environment variables that change what a benchmark measures; set ones are put in front
#: of the reproducing command.
ENV_VARS = ("DKRP_NUM_THREADS", "DKRP_DATA_DIR", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
            "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
#: Distributions whose versions are stated in each section header.
PACKAGES = ("numpy", "scipy", "scikit-learn", "dask", "distributed", "numba", "zarr",
            "dask-ml", "threadpoolctl")


def _load_average():
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover - not on this platform
        return float("nan")


#: 1-minute load average when the benchmark process imported this module (its start).
LOAD_AT_START = _load_average()
#: The ENV_VARS set when the process started: read now, because starting a Dask cluster sets
#: OMP_NUM_THREADS and friends in this process for its workers.
ENV_AT_START = {k: os.environ[k] for k in ENV_VARS if k in os.environ}


def mnist_train(n_rows=60000):
    """The real MNIST training images scaled to [-1, 1], or a random stand-in (said so)."""
    path = data_dir() / "mnist" / "train-images-idx3-ubyte.gz"
    if path.exists():
        X = read_idx(path, expected_magic=2051).reshape(-1, 784)[:n_rows]
        return X / 127.5 - 1.0, "MNIST train images (x/127.5 - 1)"
    rng = np.random.default_rng(0)
    return rng.uniform(-1, 1, (n_rows, 784)), "uniform random stand-in (MNIST not found)"


def best_of(fn, repeats=3):
    """Minimum wall time of ``repeats`` calls (the least-disturbed run)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        del result
    return min(times)


def interleaved(fns, repeats, warm_bytes=0):
    """Wall times of the callables ``fns`` timed in rounds, alternating them within each round.

    Round ``r`` runs the callables in the order rotated by ``r`` (``r % len(fns)`` first), so
    no callable always runs first, or always after the same one, and a slow spell of a
    shared machine falls on all of them rather than on the one being timed then.
    ``repeats`` is one count for all, or one per callable (a callable with fewer repeats
    drops out of the later rounds). Returns one list of times per callable, in round order.

    ``warm_bytes`` > 0: before each call (untimed), :func:`warm_pages` of that many bytes,
    so that the arrays the call allocates land on pages the machine already backs.
    """
    counts = [repeats] * len(fns) if isinstance(repeats, int) else list(repeats)
    times = [[] for _ in fns]
    for r in range(max(counts, default=0)):
        shift = r % len(fns)
        for i in list(range(shift, len(fns))) + list(range(shift)):
            if r >= counts[i]:
                continue
            if warm_bytes:
                warm_pages(warm_bytes)
            t0 = time.perf_counter()
            result = fns[i]()
            times[i].append(time.perf_counter() - t0)
            del result
    return times


def warm_pages(nbytes):
    """Allocate, touch and free ``nbytes``: the next allocations reuse these pages.

    On a virtual machine whose host takes back the memory a guest frees (a balloon's
    free-page reporting), the first touch of a page freed more than about a second ago
    faults on the host too: 1.5 to 6 ms per MiB here against 0.04 to 0.4 ms per MiB for
    a page freed just before (``bench_memory.py``). A call's output of hundreds of MiB
    then costs seconds or not depending on what ran before it. Touching as many bytes
    just before a timed call makes every method pay only the warm cost, the one a
    bare-metal machine has.
    """
    buf = np.empty(int(nbytes), dtype=np.uint8)
    buf.fill(0)
    del buf


def _cpu_model() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return float("nan")


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 0


def thread_pools(user_api=None) -> str:
    """The native thread pools loaded in this process (threadpoolctl), one entry each."""
    try:
        from threadpoolctl import threadpool_info

        pools = [
            " ".join(filter(None, [i["internal_api"], i.get("version")]))
            + f" ({i.get('architecture') or i['user_api']}, {i['num_threads']} threads)"
            for i in threadpool_info()
            if user_api is None or i["user_api"] == user_api
        ]
    except Exception:  # pragma: no cover - informative only
        return "unknown (threadpoolctl failed)"
    return ", ".join(pools) or "none loaded"


def machine_cores() -> str:
    """``<arch> <CPU model>, <n> cores``: the machine column of the protocol scripts' runs.csv."""
    return f"{platform.machine()} {_cpu_model()}, {os.cpu_count()} cores".strip()


def machine_description() -> str:
    """One line: CPU, cores, memory, Python, numpy and the BLAS pools."""
    return (
        f"{_cpu_model()}; {_usable_cores()} cores usable; {_memory_gib():.0f} GiB RAM; "
        f"Python {platform.python_version()}; numpy {np.__version__}; "
        f"BLAS: {thread_pools('blas')}"
    )


def _git_state(path: Path) -> str:
    """Short commit of the repository holding ``path``, and whether code there is modified."""
    try:
        run = dict(cwd=path, capture_output=True, text=True, timeout=10, check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], **run).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "dkrp", "benchmarks/*.py"],
                               **run).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "not a git checkout"
    return f"git {head}{' with uncommitted changes to dkrp/ or benchmarks/' if dirty else ''}"


def software_description() -> str:
    import dkrp

    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    dkrp_root = Path(dkrp.__file__).resolve().parents[1]
    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}); "
        f"dkrp {getattr(dkrp, '__version__', '?')} from {dkrp_root} ({_git_state(dkrp_root)}); "
        + "; ".join(versions)
    )


def command_line(script: str, parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The command that reproduces a run: every option of ``parser`` with its value in ``args``.

    Defaults are written out (so a later change of a default does not change what the
    command means); options whose value is ``None`` (an unset optional setting) and flags
    that are off are left out. The variables of :data:`ENV_VARS` set when the process
    started go in front.
    """
    words = [f"{k}={shlex.quote(v)}" for k, v in ENV_AT_START.items()]
    words += ["python", f"benchmarks/{script}"]
    for action in parser._actions:  # argparse has no public way to list its options
        if isinstance(action, argparse._HelpAction):
            continue
        value = getattr(args, action.dest, None)
        if not action.option_strings:  # positional
            if value is not None:
                words.append(shlex.quote(str(value)))
            continue
        flag = max(action.option_strings, key=len)
        if isinstance(action, argparse._StoreTrueAction):
            if value:
                words.append(flag)
        elif isinstance(value, (list, tuple)):  # nargs: one word per value
            words += [flag, *(shlex.quote(str(v)) for v in value)]
        elif value is not None:
            words += [flag, shlex.quote(str(value))]
    return " ".join(words)


def section_header(title: str, command: str) -> str:
    cores = _usable_cores()
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return "\n".join([
        f"### {title}",
        "",
        f"- Command: `{command}`",
        f"- Date: {now}",
        f"- Machine: {_cpu_model()}; {cores} of {os.cpu_count()} logical cores usable; "
        f"{_memory_gib():.0f} GiB RAM; {platform.platform()}",
        f"- Software: {software_description()}",
        f"- Thread pools (threadpoolctl): {thread_pools()}",
        f"- 1-minute load average: {LOAD_AT_START:.2f} at the start, {_load_average():.2f} at "
        f"the end (this run's own work included), on {cores} usable cores",
    ])


_START = "<!-- section: {name} -->"
_END = "<!-- end section -->"
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def replace_section(text: str, name: str, section: str) -> str:
    """``text`` (RESULTS.md) with section ``name`` replaced by ``section``, or appended."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"bad section name {name!r}")
    start, end = _START.format(name=name), _END
    block = f"{start}\n{section.strip()}\n{end}\n"
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == start]
    if len(starts) > 1:
        raise ValueError(f"section {name!r} appears {len(starts)} times in RESULTS.md")
    if not starts:
        return text.rstrip("\n") + ("\n\n" if text.strip() else "") + block
    i = starts[0]
    for j in range(i + 1, len(lines)):
        stripped = lines[j].strip()
        if stripped.startswith("<!-- section:"):
            break
        if stripped == end:
            return "".join(lines[:i]) + block + "".join(lines[j + 1:])
    raise ValueError(f"section {name!r} in RESULTS.md has no {end!r} before the next section")


def emit(name: str, title: str, body: str, command: str, write_results: bool,
         path: Path = RESULTS_MD) -> str:
    """Print section ``name`` (generated header, then ``body``) and, when asked, put it in
    RESULTS.md in place of that section's previous contents."""
    section = section_header(title, command) + "\n\n" + body.strip() + "\n"
    print("\n" + section, flush=True)
    if write_results:
        text = path.read_text() if path.exists() else ""
        new = replace_section(text, name, section)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(new)
        tmp.replace(path)
        how = "replaced" if _START.format(name=name) in text else "appended"
        print(f"section {name!r} of {path} {how}")
    return section


def disk_floor(nbytes, folder, piece=64 * 2**20):
    """Seconds to write ``nbytes`` to a new file in ``folder`` with plain sequential writes,
    then ``fsync`` it: the disk's own speed, the floor of any store of that many bytes.

    Returns ``(seconds_with_fsync, seconds_before_fsync)``; the second is what the page
    cache absorbs (a store written without fsync, as Zarr writes, can be that fast while
    memory lasts). The file is deleted afterwards.
    """
    buf = np.random.default_rng(0).integers(0, 256, int(piece), dtype=np.uint8).tobytes()
    path = Path(folder) / ".dkrp-disk-floor.bin"
    left = int(nbytes)
    try:
        t0 = time.perf_counter()
        with open(path, "wb", buffering=0) as f:
            while left > 0:
                left -= f.write(buf[:min(left, len(buf))])
            written = time.perf_counter() - t0
            os.fsync(f.fileno())
        return time.perf_counter() - t0, written
    finally:
        path.unlink(missing_ok=True)


def worker_rss():
    """This process' resident set size in bytes (run on workers with ``client.run``)."""
    import psutil

    return psutil.Process().memory_info().rss


class MemorySampler:
    """Peak RSS per worker, sampled with ``client.run`` in a background thread."""

    def __init__(self, client, every=0.5):
        self.client, self.every = client, every
        self.peak = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            try:
                for addr, rss in self.client.run(worker_rss).items():
                    self.peak[addr] = max(self.peak.get(addr, 0), rss)
            except Exception:  # noqa: BLE001 - a missed sample is not an error
                pass
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# --------------------------------------------------------------------------- studies
# The issue studies (issue30_*.py) measure factors one at a time into a resumable
# runs.csv and generate README.md tables from it, keeping the hand-written conclusion.


def read_rows(path):
    """The rows of a study's ``runs.csv``, as dicts of strings."""
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def mean_sd(values, digits=2):
    """``"mean ± sd"`` of ``values`` (sd with ddof 1; the mean alone for one value)."""
    values = np.asarray(values, dtype=float)
    if len(values) > 1:
        return f"{values.mean():.{digits}f} ± {values.std(ddof=1):.{digits}f}"
    return f"{values.mean():.{digits}f}" if len(values) else ""


def run_study(out, fields, key, produce, readme, *, from_csv=False, hide=("machine",)):
    """Append what ``produce(done)`` yields to ``out/runs.csv``, then write ``out/README.md``.

    ``done`` holds the ``key(row)`` of every row already measured (``produce`` skips
    them, so a rerun resumes); each row is flushed as it comes. Rows written under an older
    column set are rewritten under ``fields`` first. ``README.md`` becomes
    ``readme(rows, conclusion)``, where ``conclusion`` is the ``## Conclusion`` section of
    the README already there (written by hand after a run), or ``""``. ``from_csv`` only
    rewrites the README.
    """
    import csv

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "runs.csv"
    if not from_csv:
        old = read_rows(path) if path.exists() else []
        if old and list(old[0]) != list(fields):
            with open(path, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=fields)
                writer.writeheader()
                writer.writerows(old)
        done = {key(r) for r in old}
        with open(path, "a", newline="") as f:  # resumes: measured rows are kept
            writer = csv.DictWriter(f, fieldnames=fields)
            if not old:
                writer.writeheader()
            for row in produce(done):
                writer.writerow(row)
                f.flush()
                done.add(key(row))
                print({k: v for k, v in row.items() if k not in hide}, flush=True)
    conclusion = ""
    readme_path = out / "README.md"
    if readme_path.exists() and "## Conclusion" in readme_path.read_text():
        text = readme_path.read_text()
        conclusion = text[text.index("## Conclusion"):]
    readme_path.write_text(readme(read_rows(path), conclusion))
    print(f"wrote {readme_path}")


def study_main(argv, doc, *, out, parts, default_parts, fields, key, readme,
               hide=("machine",), add_arguments=None, part_args=lambda args: ()):
    """The command line of an issue study: ``--out``, ``--parts`` (of ``parts``, a dict of
    ``name -> rows(machine, done, *part_args(args))``), ``--from-csv`` and whatever
    ``add_arguments(parser)`` adds; then :func:`run_study`."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(out),
                        help="folder for runs.csv and README.md")
    parser.add_argument("--parts", nargs="+", choices=sorted(parts),
                        default=list(default_parts), help="what to measure")
    parser.add_argument("--from-csv", action="store_true",
                        help="only rewrite README.md from the folder's runs.csv")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)

    def produce(done):
        machine = machine_cores()
        for part in args.parts:
            yield from parts[part](machine, done, *part_args(args))

    run_study(args.out, fields, key, produce, readme, from_csv=args.from_csv, hide=hide)
