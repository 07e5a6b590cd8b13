"""What a committed fixture's bytes depend on, and comparing them on any x86-64 machine.

A spec's *state* (hyperplanes, signs, offsets) is drawn without BLAS and must be the same
bit for bit everywhere: tests pin it with its checksum. Its *features* go through a GEMM,
and a GEMM's last bits follow the BLAS kernel (OpenBLAS picks Haswell, SkylakeX, Zen, ...
by CPU, and the README's seed contract promises bytes only on the same kernel). So a
fixture's features are compared byte for byte on the kernel that wrote them, and to a
rounding tolerance elsewhere, saying why.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

#: Where a fixture folder records the kernel that wrote its feature bytes.
MACHINE_FILE = "MACHINE.json"


def blas_kernel() -> str:
    """numpy's BLAS and the kernel it runs here, e.g. ``"openblas Haswell"`` (what a spec
    records in ``versions["blas"]``)."""
    from dkrp._spec import machine

    return machine()["blas"]


def written_on(folder: Path) -> str:
    """The BLAS kernel recorded in ``folder/MACHINE.json``."""
    return json.loads((Path(folder) / MACHINE_FILE).read_text())["blas"]


def assert_same_features(got, expected, folder: Path, *, what: str = "features"):
    """``got`` has ``expected``'s bytes on the BLAS kernel that wrote ``folder``'s fixtures,
    and equals them to a GEMM's rounding elsewhere.

    The tolerance is a dot product's rounding bound, not a fit to any output: each
    feature is a function of inner products ``<w, x>`` of the fixture's few features
    (|w|, |x| of order 1), which another kernel may sum in another order, with or without
    FMA: a few units in the last place of the dtype, amplified at most by the map's
    degree. ``256 eps`` relative (and absolute, for values near zero) holds that with a
    wide margin and is still a million times below what another seed or draw changes.
    """
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (
        got.dtype, expected.dtype, got.shape, expected.shape)
    here, there = blas_kernel(), written_on(folder)
    if here == there:
        assert got.tobytes() == expected.tobytes(), (
            f"{what} differ from the fixture's bytes on the BLAS kernel that wrote them "
            f"({there})")
        return
    eps = np.finfo(got.dtype).eps
    np.testing.assert_allclose(
        got, expected, rtol=256 * eps, atol=256 * eps * max(1.0, float(np.abs(expected).max())),
        err_msg=f"{what}: this machine's BLAS kernel ({here}) is not the one that wrote the "
                f"fixture ({there}), so only a GEMM's rounding may differ")
