"""Time SignProductEmbedding.transform_bits against transform (issue 13: at most 1.3x).

Both run the same blocked GEMM of the 2m projections and the product of its halves;
``transform`` writes n x m floats, ``transform_bits`` compares and packs each block
to n x ceil(m/8) bytes. Times are medians of interleaved rounds in one process.

Usage::

    python benchmarks/bench_spe_bits.py                      # MNIST shape
    python benchmarks/bench_spe_bits.py --rows 20000 --ms 1024 4096 --repeats 7
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved, mnist_train  # noqa: E402

import dkrp  # noqa: E402
from dkrp._threading import num_threads  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=10000)
    p.add_argument("--ms", type=int, nargs="+", default=[512, 2048])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    X, source = mnist_train(args.rows)
    print(f"input: {source}, {X.shape}; threads: {num_threads()}")
    print("| dtype | m | transform s | transform_bits s | ratio | output MB (float / bits) |")
    print("|---|---|---|---|---|---|")
    for dtype in (np.float32, np.float64):
        Xd = np.ascontiguousarray(X, dtype=dtype)
        for m in args.ms:
            spe = dkrp.SignProductEmbedding(n_components=m, random_state=0).fit(Xd)
            spe.transform(Xd[:10])  # build the cached factor matrix outside the timing
            t_float, t_bits = interleaved([partial(spe.transform, Xd),
                                           partial(spe.transform_bits, Xd)], args.repeats)
            a, b = float(np.median(t_float)), float(np.median(t_bits))
            mb = (Xd.shape[0] * m * Xd.itemsize / 1e6, Xd.shape[0] * ((m + 7) // 8) / 1e6)
            print(f"| {np.dtype(dtype).name} | {m} | {a:.3f} | {b:.3f} | {b / a:.2f} | "
                  f"{mb[0]:.0f} / {mb[1]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
