"""numba, with its typing and lowering tables loaded before any kernel first runs.

dkrp's compiled kernels are first called from several threads at once: the row
blocks of one transform run in a thread pool, and a dask worker runs several tasks.
numba loads most of its typing and lowering modules lazily, on a process's first
compilation, and those modules register new types with ``numba.typeof`` while it
runs; a second thread typing its arguments meanwhile iterates the same registry and
fails with "dictionary changed size during iteration" (seen as a failed featurize
partition). Loading the tables once, at import (which Python serialises), leaves
nothing for a first compilation to register. Kernel modules import ``numba`` from
here instead of directly.
"""

import numba
from numba.core.registry import cpu_target

cpu_target.typing_context.refresh()
cpu_target.target_context.refresh()

__all__ = ["numba"]
