"""dkrp: distributed kernelized random projections and random features on Dask.

A random feature map turns each row x into z(x) so that linear models on z
approximate kernel models. dkrp's maps are defined by a seed and a few
parameters (a JSON spec), so every Dask worker regenerates the same hyperplanes
and featurizes its partition independently.
"""

# The public names are imported on first use (PEP 562), so `import dkrp` and the `dkrp`
# command start without scikit-learn, scipy or numba; `from dkrp import X` works as before.

import importlib as _importlib

from ._names import PUBLIC_MODULES as _PUBLIC_MODULES

#: every public name: dkrp's projectors (``dkrp._names.PROJECTORS``), the other public
#: classes and functions, and ``__version__``
__all__ = [*_PUBLIC_MODULES, "__version__"]


def _version() -> str:
    """The installed distribution's version (its single source is pyproject.toml).

    A source tree that was never installed (``pip install -e .``) has no metadata:
    ``"0+unknown"`` then, which no release carries, so a spec written there never
    claims the version of one.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dkrp")
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name):
    if name == "__version__":  # read on first use: importlib.metadata is slow to import
        value = globals()["__version__"] = _version()
        return value
    module = _PUBLIC_MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'dkrp' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
