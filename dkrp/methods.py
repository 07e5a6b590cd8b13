"""The ``--method`` switch: one name per feature map, shared by the CLI and pipelines.

Each entry names its projector class by spec name, a key of
:data:`dkrp._names.PROJECTORS` (one method per map; the class is imported lazily, so
optional baselines cost nothing until used), and how generic options map onto its
parameters.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from ._names import PROJECTORS
from .errors import InvalidInputError

__all__ = ["METHODS", "MethodInfo", "fit_pass_message", "make_projector", "method_names",
           "method_of", "scale_warning"]


@dataclass(frozen=True)
class MethodInfo:
    """A method's projector class; its options and kind are read from the class itself."""

    projector: str  # its spec name: a key of dkrp._names.PROJECTORS
    summary: str
    aliases: dict = field(default_factory=dict)  # generic option -> class parameter
    #: What a data-dependent method's one fitting pass gathers, formatted with the
    #: projector's parameters
    fit_pass: str = ""
    #: The input scaling the map expects (``dkrp methods`` prints it)
    scaling: str = ""

    @property
    def target(self) -> str:
        """Where the class lives, ``"module:ClassName"`` (from :data:`~dkrp._names.PROJECTORS`)."""
        return PROJECTORS[self.projector]

    def load(self):
        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)

    @property
    def options(self) -> tuple:
        """The class's parameters (its ``__init__`` signature), in order."""
        return tuple(self.load()._get_param_names())

    @property
    def data_dependent(self) -> bool:
        """True for maps fitted from the data (one pass over the input before featurizing)."""
        return bool(self.load().data_dependent)


#: The scaling of polynomial and dot-product kernels: their value grows as ||x||^(2g)
_BOUNDED = ("bounded features, e.g. in [-1, 1] (pixels: x/127.5 - 1), or --scale-rows unit: "
            "the kernel grows as ||x||^(2 degree), so raw 0..255 pixels give huge features")
_BY_KERNEL = ("as its --kernel: polynomial kernels want bounded features (or --scale-rows "
              "unit), gaussian/laplacian want --standardize")

METHODS = {
    "krp": MethodInfo(
        "PolynomialRandomProjection",
        "Kernelized Random Projection, homogeneous polynomial kernel (López-Sánchez 2018)",
        scaling=_BOUNDED,
    ),
    "explicit": MethodInfo(
        "ExplicitPolynomialProjection",
        "explicit φ(x) + random projection (reference; O(d^g) per row)",
        scaling=_BOUNDED,
    ),
    "rff": MethodInfo(
        "RandomFourierFeatures",
        "random Fourier features, Gaussian or Laplacian kernel (Rahimi & Recht 2007)",
        scaling="--standardize (gamma then counts in standard deviations; or --gamma scale)",
    ),
    "nystroem": MethodInfo(
        "Nystroem",
        "Nyström with uniformly sampled landmarks (Williams & Seeger 2001)",
        fit_pass="{n_components} landmark rows, drawn uniformly without replacement by the seed",
        scaling=_BY_KERNEL,
    ),
    "kg-rp": MethodInfo(
        "KulisGraumanRP",
        "Kulis–Grauman kernelized random projection with sampled landmarks",
        aliases={"n_hyperplanes": "n_landmarks"},
        fit_pass="{n_landmarks} landmark rows, drawn uniformly without replacement by the seed",
        scaling=_BY_KERNEL,
    ),
    "prp": MethodInfo(
        "IndependentPolynomialProjection",
        "P-RP-style projection with fresh hyperplanes per product term",
        scaling=_BOUNDED,
    ),
    "maclaurin": MethodInfo(
        "RandomMaclaurin",
        "Random Maclaurin features for dot-product kernels (Kar & Karnick 2012)",
        scaling=_BOUNDED,
    ),
    "tensorsketch": MethodInfo(
        "TensorSketch",
        "TensorSketch for polynomial kernels (Pham & Pagh 2013)",
        scaling=_BOUNDED,
    ),
    "srf": MethodInfo(
        "SphericalRandomFeatures",
        "Spherical Random Features, polynomial kernel on the unit sphere (Pennington 2015)",
        scaling="none needed: the map normalises each row to the unit sphere itself; --standardize "
                "first when columns have different units",
    ),
    "spe": MethodInfo(
        "SignProductEmbedding",
        "Sign Product Embedding: quadratic ROP sketches B(x) and 1-bit sign(B(x)) "
        "(Delogne & Jacques)",
        scaling=_BOUNDED,
    ),
    "pca": MethodInfo(
        "PCAProjector",
        "PCA (covariance eigendecomposition) for the PCA-then-kernel-SVM comparison",
        fit_pass="column sums and X^T X",
        scaling="--standardize when columns have different units (PCA of correlations)",
    ),
}


def method_names():
    """Names accepted by ``--method``."""
    return sorted(METHODS)


def make_projector(method, **options):
    """Build the projector of ``method`` from generic options.

    Options the method does not take are dropped when they are ``None`` and refused
    otherwise, so a stray ``--gamma`` for ``krp`` is an error, not silently ignored.
    """
    if method not in METHODS:
        raise InvalidInputError(
            f"Unknown method {method!r}; choose one of {', '.join(method_names())}."
        )
    info = METHODS[method]
    params = {}
    for name, value in options.items():
        target = info.aliases.get(name, name)
        if target in info.options:
            if value is not None:
                params[target] = value
        elif value is not None:
            from .errors import Message, Param

            takes = sorted({*info.options, *(a for a, t in info.aliases.items()
                                             if t in info.options)})
            raise InvalidInputError(Message("Method {!r} does not take {}; it takes {}.", method,
                                            Param(name), Message.join(", ", map(Param, takes))))
    return info.load()(**params)


def fit_pass_message(method, projector) -> str:
    """What a data-dependent ``method`` reads from the input to fit, in one line.

    Empty for data-independent methods (they need ``n_features`` alone).
    """
    info = METHODS[method]
    if not info.data_dependent:
        return ""
    what = info.fit_pass.format(**projector.get_params(deep=False))
    kind = "sampling pass" if "landmark" in info.fit_pass else "pass"
    return (f"{method} is data-dependent: fitting makes exactly one {kind} over the input "
            f"({what}) before the featurizing pass")


def method_of(projector) -> str | None:
    """The ``--method`` name of ``projector``'s class, or None for a class not listed."""
    cls = type(projector)
    target = f"{cls.__module__}:{cls.__name__}"
    return next((name for name, info in METHODS.items() if info.target == target), None)


#: How far (a factor) the scale of a map's input may be from the one it expects before
#: :func:`scale_warning` speaks: three orders of magnitude, so inputs scaled as ``dkrp
#: methods`` advises (standardized columns, [-1, 1] pixels: norms up to a few tens) pass
SCALE_TOLERANCE = 1e3


def scale_warning(projector, rows) -> str | None:
    """One line when ``rows`` are far from the scale ``projector``'s map expects, else None.

    A cheap check on rows already read (``featurize`` passes the input's first and
    last rows, which its fingerprint reads anyway), scaled as the map scales them
    (``preprocessing_``). Maps of a polynomial or dot-product kernel (krp, explicit,
    prp, maclaurin, tensorsketch, spe) want rows of norm near 1: their kernel grows
    as ``||x||^(2 degree)``. Random Fourier features want ``gamma`` times the rows'
    squared distance (Gaussian; distance for Laplacian) near 1: far above, the kernel
    of any two rows is 0 and the features noise; far below, 1. A norm or distance
    more than :data:`SCALE_TOLERANCE` times off says so. Other maps (srf normalises
    rows itself; data-dependent ones) are not checked.

    Parameters
    ----------
    projector : BaseProjector
        Fitted (with its scaling, if any).
    rows : sequence of array-like
        Input rows (dense or sparse), as stored: before the map's scaling.

    Returns
    -------
    Message or None
        The warning, naming the scale found and the parameter to pass (a
        :class:`~dkrp.errors.Message`: ``dkrp featurize`` says its flag), or None.
    """
    import numpy as np

    from .errors import Message, Param
    from .preprocessing import preprocess

    name = method_of(projector)
    if name is None or not rows:
        return None
    X = np.vstack([np.asarray(r.toarray() if hasattr(r, "toarray") else r, dtype=np.float64)
                   for r in rows])
    prep = getattr(projector, "preprocessing_", None) or {}
    X = preprocess(X, prep)
    standardize = "" if "standardize" in prep else Param("standardize", True)
    if METHODS[name].scaling == _BOUNDED:
        norm = float(np.sqrt(np.einsum("ij,ij->i", X, X)).max())
        if norm == 0 or 1 / SCALE_TOLERANCE <= norm <= SCALE_TOLERANCE:
            return None
        degree = getattr(projector, "degree", 2)
        return Message(
            "the input's rows have norm up to {:.3g} as the map sees them (its first and last "
            "rows), far from the norm near 1 that {} expects: its features scale as the norm "
            "to the power {} (about {:.3g} here). Scale the input: {}{}; see `dkrp methods`.",
            norm, name, degree, norm ** degree, Param("scale_rows", "unit"),
            Message(", or {}", standardize) if standardize else "")
    if name == "rff" and hasattr(projector, "gamma_") and X.shape[0] > 1:
        diff = X[0] - X[-1]
        gaussian = projector.kernel == "gaussian"
        # the kernel's exponent for the two rows, as a length (the scale of the rows)
        exponent = projector.gamma_ * (float(diff @ diff) if gaussian
                                       else float(np.abs(diff).sum()))
        length = np.sqrt(exponent) if gaussian else exponent
        if length == 0 or 1 / SCALE_TOLERANCE <= length <= SCALE_TOLERANCE:
            return None
        what = "gamma * ||x - y||^2" if gaussian else "gamma * ||x - y||_1"
        value = "0" if length > 1 else "1"
        return Message(
            "{} is {:.3g} for the input's first and last rows as the map sees them, far from "
            "the values near 1 where the {} kernel varies: it is about {} for any two rows. "
            "{} gamma follow the data: {}; see `dkrp methods`.", what, exponent,
            projector.kernel, value,
            Message("Scale the input: {}, or let", standardize) if standardize else "Let",
            Param("gamma", "scale"))
    return None
