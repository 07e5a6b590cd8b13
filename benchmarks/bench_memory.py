"""What fresh memory costs on this machine: the page faults every new output pays.

Every transform allocates its output, every feature-store chunk is written into pages
of the page cache that did not exist before, and a Dask worker (which sets
``MALLOC_TRIM_THRESHOLD_``, so glibc maps every large block afresh and unmaps it on
free) allocates each chunk's arrays anew. The first write to a new page is a page
fault; its cost is a property of the machine (bare metal: a fraction of a
microsecond per 4 KiB page; a virtual machine whose host backs guest memory lazily or
takes freed pages back: many times that, and varying with what the host did since).
Issue 15's floors (GEMM + one write of the output, the disk's own speed) include this
cost, and it is what makes some timings here bimodal. For ``--mib`` MiB, this prints
in one run:

* anonymous memory: ``np.empty`` + fill + free, repeated, in a child process with
  glibc's defaults and in one with ``MALLOC_TRIM_THRESHOLD_=65536`` (a Dask worker's
  setting); the first round, the median and the slowest, and the minor page faults per
  round; beside the same fill of a buffer already touched (no fault: the memory's own
  write speed);
* ``--pause-mib`` MiB after a pause of ``--pause`` seconds before each round (memory
  freed that long ago), and after the pause followed by ``_common.warm_pages`` (what
  the timing benchmarks do before each call);
* the page cache: writing the same bytes to a new file, and over an existing file of
  that size (pages already in the cache), without fsync.

Usage::

    python benchmarks/bench_memory.py
    python benchmarks/bench_memory.py --mib 25 --rounds 15 --write-results
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, emit  # noqa: E402

WORKER_TRIM = "65536"


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def anonymous_rounds(nbytes, rounds, pause=0.0, warm=False):
    """Seconds and minor faults of each ``np.empty(nbytes)`` + fill + free round.

    ``pause``: seconds to sleep before each round (the memory freed by the round before
    stays free that long); ``warm``: then :func:`_common.warm_pages` of ``nbytes``, untimed.
    """
    from _common import warm_pages

    seconds, faults = [], []
    for _ in range(rounds):
        time.sleep(pause)
        if warm:
            warm_pages(nbytes)
        f0, t0 = _faults(), time.perf_counter()
        a = np.empty(nbytes, dtype=np.uint8)
        a.fill(1)
        del a
        seconds.append(time.perf_counter() - t0)
        faults.append(_faults() - f0)
    warm = np.empty(nbytes, dtype=np.uint8)
    warm.fill(0)
    t0 = time.perf_counter()
    warm.fill(1)
    return {"seconds": seconds, "faults": faults, "warm": time.perf_counter() - t0}


def page_cache_rounds(nbytes, rounds, folder):
    """Seconds of writing ``nbytes`` to a new file, and over an existing one, per round."""
    data = np.ones(nbytes, dtype=np.uint8).tobytes()
    new, over = [], []
    path = Path(folder) / "page-cache.bin"
    for _ in range(rounds):
        path.unlink(missing_ok=True)
        t0 = time.perf_counter()
        with open(path, "wb", buffering=0) as f:
            f.write(data)
        new.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with open(path, "r+b", buffering=0) as f:
            f.write(data)
        over.append(time.perf_counter() - t0)
    path.unlink(missing_ok=True)
    return {"new": new, "over": over}


def _child(nbytes, rounds, trim, pause=0.0, warm=False):
    """Run :func:`anonymous_rounds` in a fresh interpreter (glibc reads its env at start)."""
    env = dict(os.environ)
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    if trim is not None:
        env["MALLOC_TRIM_THRESHOLD_"] = trim
    code = (f"import sys, json; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
            f"import bench_memory as b; "
            f"print(json.dumps(b.anonymous_rounds({nbytes}, {rounds}, {pause}, {warm})))")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _ms_per_mib(seconds, mib):
    return 1e3 * seconds / mib


def body(mib, rounds, anon, cache):
    """The section's table; ``anon`` holds ``(label, MiB per round, result)``."""
    lines = [
        f"Rounds of {mib} MiB ({mib * 256:,} pages of 4 KiB), {rounds} of them, unless the "
        "row says otherwise. ms/MiB = milliseconds per MiB (1 ms/MiB is 4 µs per 4 KiB "
        "page). Minor faults per round from getrusage (transparent huge pages make "
        "fewer, larger faults).",
        "",
        "| what | first round ms/MiB | median ms/MiB | slowest ms/MiB | minor faults per round "
        "(median) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, size, r in anon:
        s = r["seconds"]
        lines.append(f"| {label} | {_ms_per_mib(s[0], size):.2f} | "
                     f"{_ms_per_mib(float(np.median(s)), size):.2f} | "
                     f"{_ms_per_mib(max(s), size):.2f} | {int(np.median(r['faults'])):,} |")
    warm = min(r["warm"] / size for _, size, r in anon)
    lines.append(f"| fill of a buffer already touched (no fault) | – | "
                 f"{_ms_per_mib(warm, 1):.2f} | – | 0 |")
    for label, key in (("write to a new file (page cache, no fsync)", "new"),
                       ("write over an existing file (pages cached)", "over")):
        s = cache[key]
        lines.append(f"| {label} | {_ms_per_mib(s[0], mib):.2f} | "
                     f"{_ms_per_mib(float(np.median(s)), mib):.2f} | "
                     f"{_ms_per_mib(max(s), mib):.2f} | – |")
    lines += ["", "- All rounds (ms/MiB): " + "; ".join(
        f"{label}: " + " ".join(f"{_ms_per_mib(x, size):.2f}" for x in r["seconds"])
        for label, size, r in anon) + "; new file: " + " ".join(
        f"{_ms_per_mib(x, mib):.2f}" for x in cache["new"])]
    lines += ["", "Within a row every round is the same work; the differences are the "
              "page faults' cost: the first touch of a page freed a while ago against one "
              "freed just before."]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=25,
                        help="MiB per round (25: a 4,096 x 1,500 float32 chunk)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--pause", type=float, default=3.0,
                        help="seconds of the pause before each round of the pause rows")
    parser.add_argument("--pause-rounds", type=int, default=5)
    parser.add_argument("--pause-mib", type=int, default=343,
                        help="MiB per round of the pause rows (343: the 60,000 x 1,500 "
                        "float32 output of bench_rff)")
    parser.add_argument("--workdir", default=None, help="folder of the file writes "
                        "(default: system temp)")
    parser.add_argument("--write-results", action="store_true",
                        help="replace this benchmark's section of benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    nbytes, pause_bytes = args.mib * 2**20, args.pause_mib * 2**20
    anon = [("new array + fill + free, glibc defaults", args.mib,
             _child(nbytes, args.rounds, None)),
            (f"new array + fill + free, MALLOC_TRIM_THRESHOLD_={WORKER_TRIM} (Dask worker)",
             args.mib, _child(nbytes, args.rounds, WORKER_TRIM)),
            (f"{args.pause_mib} MiB, glibc defaults, each round after a {args.pause:g} s pause",
             args.pause_mib, _child(pause_bytes, args.pause_rounds, None, args.pause)),
            (f"{args.pause_mib} MiB after a {args.pause:g} s pause, then `warm_pages` of as "
             "many bytes (untimed)", args.pause_mib,
             _child(pause_bytes, args.pause_rounds, None, args.pause, True))]
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        cache = page_cache_rounds(nbytes, args.rounds, folder)
    emit("bench_memory", f"What fresh memory costs on this machine: page faults of new "
         f"arrays and new file pages, {args.mib} MiB per round",
         body(args.mib, args.rounds, anon, cache),
         command_line("bench_memory.py", parser, args), args.write_results)


if __name__ == "__main__":
    main()
