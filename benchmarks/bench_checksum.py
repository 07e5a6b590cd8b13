"""What the crc32c checksum of every chunk costs (issue 10 case 4).

Feature stores store ``Z`` raw (random features do not compress), so the checksum is
the only codec work on their chunks: it is where its cost shows most. Two measurements
of a 200,000 × 1000 float32 feature store (800 MB), each with and without the
``crc32c`` codec, each the minimum of ``--repeats`` runs, the two settings alternating
(the machine is shared):

* storage: the chunks of ``Z`` written one after another from memory, then read back,
  through Zarr alone (no featurizing): the checksum's share of pure I/O;
* dkrp: ``write_features`` of a random Fourier feature map (k = 1000) of a 200,000 × 54
  float32 input on dask's threaded scheduler, and reading the store back
  (``open_features(...).Z.sum()``): the share in a real run.

Reads are from the page cache (the store was just written): the worst case for the
checksum's relative cost, since no disk time hides it.

Usage::

    python benchmarks/bench_checksum.py              # 200,000 x 1000 (about 5 minutes, 2 cores)
    python benchmarks/bench_checksum.py --rows 20000 # quick
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_description  # noqa: E402


@contextmanager
def checksums(enabled):
    """New stores with (as dkrp writes them) or without the crc32c codec."""
    if enabled:
        yield
        return
    with mock.patch("dkrp.feature_store.format.with_checksum",
                    lambda compressors=(): tuple(compressors or ())):
        yield


def best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def storage(root, rows, cols, chunk_rows):
    """``(write, read)`` callables for each setting, through Zarr alone."""
    import zarr
    from zarr.codecs import Crc32cCodec

    block = np.random.default_rng(0).standard_normal((chunk_rows, cols)).astype(np.float32)

    def make(enabled):
        path = root / f"storage-{enabled}.zarr"

        def write():
            shutil.rmtree(path, ignore_errors=True)
            z = zarr.create_array(str(path), shape=(rows, cols), chunks=(chunk_rows, cols),
                                  dtype="float32", fill_value=np.nan,
                                  compressors=[Crc32cCodec()] if enabled else None,
                                  config={"write_empty_chunks": True})
            for start in range(0, rows, chunk_rows):
                stop = min(start + chunk_rows, rows)
                z[start:stop] = block[: stop - start]

        def read():
            z = zarr.open_array(str(path), mode="r")
            for start in range(0, rows, chunk_rows):
                z[start : start + chunk_rows]

        return write, read

    return {enabled: make(enabled) for enabled in (False, True)}


def dkrp_run(root, rows, cols, chunk_rows):
    """``(write, read)`` callables for each setting: write_features and open_features."""
    import dask.array as da

    from dkrp import RandomFourierFeatures
    from dkrp.feature_store import open_features, write_features

    X = da.random.default_rng(0).standard_normal((rows, 54), chunks=(chunk_rows, 54),
                                                 dtype=np.float32)
    X = X.persist(scheduler="threads")
    rff = RandomFourierFeatures(n_components=cols, gamma=0.1, random_state=0).fit(X)

    def make(enabled):
        out = root / f"dkrp-{enabled}.zarr"

        def write():
            shutil.rmtree(out, ignore_errors=True)
            with checksums(enabled):
                write_features(X, rff, out, progress=False, dtype="float32")

        def read():
            open_features(out).Z.sum().compute(scheduler="threads")

        return write, read

    return {enabled: make(enabled) for enabled in (False, True)}


def interleaved(runs, repeats):
    """Minimum times ``{enabled: [write, read]}``, the settings alternating run by run
    (so that a noisy neighbour or a cold cache does not favour one of them)."""
    times = {enabled: [[], []] for enabled in runs}
    for r in range(repeats):
        for enabled in ((False, True) if r % 2 == 0 else (True, False)):
            write, read = runs[enabled]
            for i, fn in enumerate((write, read)):
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                times[enabled][i].append((time.perf_counter() - t0, time.process_time() - c0))
    return {enabled: [(min(w for w, _ in t), min(c for _, c in t)) for t in pair]
            for enabled, pair in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--cols", type=int, default=1000)
    parser.add_argument("--chunk-rows", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="Where to write the stores (default: tmp).")
    args = parser.parse_args(argv)
    import google_crc32c

    root = Path(tempfile.mkdtemp(prefix="bench-crc-", dir=args.dir))
    try:
        mb = args.rows * args.cols * 4 / 1e6
        print(machine_description())
        print(f"{args.rows} x {args.cols} float32 ({mb:.0f} MB), chunks of {args.chunk_rows} "
              f"rows, best of {args.repeats}; google_crc32c implementation: "
              f"{google_crc32c.implementation}")
        buf = np.random.default_rng(1).bytes(64 * 2**20)
        t = best(lambda: google_crc32c.value(buf), args.repeats)
        print(f"crc32c alone: {64 * 2**20 / t / 1e9:.1f} GB/s")
        print("wall and CPU (all threads) seconds, each the minimum over the runs")
        print(f"{'what':<16} {'wall: none':>10} {'crc32c':>7} {'cost':>7}   "
              f"{'CPU: none':>9} {'crc32c':>7} {'cost':>7}")
        for name, fn in (("storage", storage), ("dkrp", dkrp_run)):
            t = interleaved(fn(root, args.rows, args.cols, args.chunk_rows), args.repeats)
            for i, what in enumerate(("write", "read")):
                (wa, ca), (wb, cb) = t[False][i], t[True][i]
                print(f"{name + ' ' + what:<16} {wa:>10.3f} {wb:>7.3f} "
                      f"{100 * (wb / wa - 1):>+6.1f}%   {ca:>9.3f} {cb:>7.3f} "
                      f"{100 * (cb / ca - 1):>+6.1f}%")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
