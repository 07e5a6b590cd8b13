"""The ``--method`` switch: one name per feature map, shared by the CLI and pipelines.

Each entry names the projector class (imported lazily, so optional baselines cost
nothing until used) and how generic options map onto its parameters.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

__all__ = ["METHODS", "MethodInfo", "fit_pass_message", "make_projector", "method_names"]


@dataclass(frozen=True)
class MethodInfo:
    """Where a method's class lives; its options and kind are read from the class itself."""

    target: str  # "module:ClassName"
    summary: str
    aliases: dict = field(default_factory=dict)  # generic option -> class parameter
    #: What a data-dependent method's one fitting pass gathers, formatted with the
    #: projector's parameters
    fit_pass: str = ""
    #: The input scaling the map expects (``dkrp methods`` prints it)
    scaling: str = ""

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
        "dkrp.features.polynomial:PolynomialRandomProjection",
        "Kernelized Random Projection, homogeneous polynomial kernel (López-Sánchez 2018)",
        scaling=_BOUNDED,
    ),
    "explicit": MethodInfo(
        "dkrp.features.polynomial:ExplicitPolynomialProjection",
        "explicit φ(x) + random projection (reference; O(d^g) per row)",
        scaling=_BOUNDED,
    ),
    "rff": MethodInfo(
        "dkrp.features.fourier:RandomFourierFeatures",
        "random Fourier features, Gaussian or Laplacian kernel (Rahimi & Recht 2007)",
        scaling="--standardize (gamma then counts in standard deviations; or --gamma scale)",
    ),
    "nystroem": MethodInfo(
        "dkrp.baselines.nystroem:Nystroem",
        "Nyström with uniformly sampled landmarks (Williams & Seeger 2001)",
        fit_pass="{n_components} landmark rows, drawn uniformly without replacement by the seed",
        scaling=_BY_KERNEL,
    ),
    "kg-rp": MethodInfo(
        "dkrp.baselines.kulis_grauman:KulisGraumanRP",
        "Kulis–Grauman kernelized random projection with sampled landmarks",
        aliases={"n_hyperplanes": "n_landmarks"},
        fit_pass="{n_landmarks} landmark rows, drawn uniformly without replacement by the seed",
        scaling=_BY_KERNEL,
    ),
    "prp": MethodInfo(
        "dkrp.features.independent:IndependentPolynomialProjection",
        "P-RP-style projection with fresh hyperplanes per product term",
        scaling=_BOUNDED,
    ),
    "maclaurin": MethodInfo(
        "dkrp.features.maclaurin:RandomMaclaurin",
        "Random Maclaurin features for dot-product kernels (Kar & Karnick 2012)",
        scaling=_BOUNDED,
    ),
    "tensorsketch": MethodInfo(
        "dkrp.features.tensorsketch:TensorSketch",
        "TensorSketch for polynomial kernels (Pham & Pagh 2013)",
        scaling=_BOUNDED,
    ),
    "srf": MethodInfo(
        "dkrp.features.spherical:SphericalRandomFeatures",
        "Spherical Random Features, polynomial kernel on the unit sphere (Pennington 2015)",
        scaling="none needed: the map normalises each row to the unit sphere itself; --standardize "
                "first when columns have different units",
    ),
    "spe": MethodInfo(
        "dkrp.features.sign_product:SignProductEmbedding",
        "Sign Product Embedding: quadratic ROP sketches B(x) and 1-bit sign(B(x)) "
        "(Delogne & Jacques)",
        scaling=_BOUNDED,
    ),
    "pca": MethodInfo(
        "dkrp.baselines.pca:PCAProjector",
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
        raise ValueError(f"Unknown method {method!r}; choose one of {', '.join(method_names())}.")
    info = METHODS[method]
    params = {}
    for name, value in options.items():
        target = info.aliases.get(name, name)
        if target in info.options:
            if value is not None:
                params[target] = value
        elif value is not None:
            raise ValueError(
                f"Method {method!r} does not take option {name!r}; it takes "
                f"{', '.join(info.options)}."
            )
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
