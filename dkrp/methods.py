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
    """Where a method's class lives and which generic options it takes."""

    target: str  # "module:ClassName"
    summary: str
    options: tuple = ()  # generic option names the class accepts (degree, gamma, ...)
    aliases: dict = field(default_factory=dict)  # generic option -> class parameter
    #: True for maps fitted from the data (one pass over the input before featurizing)
    data_dependent: bool = False
    #: What that one pass gathers, formatted with the projector's parameters
    fit_pass: str = ""

    def load(self):
        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)


METHODS = {
    "krp": MethodInfo(
        "dkrp.features.polynomial:PolynomialRandomProjection",
        "Kernelized Random Projection, homogeneous polynomial kernel (López-Sánchez 2018)",
        ("degree", "n_components", "n_hyperplanes", "n_terms", "distribution", "density",
         "pool", "index_design", "random_state"),
    ),
    "explicit": MethodInfo(
        "dkrp.features.polynomial:ExplicitPolynomialProjection",
        "explicit φ(x) + random projection (reference; O(d^g) per row)",
        ("degree", "n_components", "distribution", "density", "random_state"),
    ),
    "rff": MethodInfo(
        "dkrp.features.fourier:RandomFourierFeatures",
        "random Fourier features, Gaussian or Laplacian kernel (Rahimi & Recht 2007)",
        ("kernel", "gamma", "n_components", "feature_map", "pool", "random_state"),
    ),
    "nystroem": MethodInfo(
        "dkrp.baselines.nystroem:Nystroem",
        "Nyström with uniformly sampled landmarks (Williams & Seeger 2001)",
        ("kernel", "degree", "gamma", "coef0", "n_components", "random_state"),
        data_dependent=True,
        fit_pass="{n_components} landmark rows, drawn uniformly without replacement by the seed",
    ),
    "kg-rp": MethodInfo(
        "dkrp.baselines.kulis_grauman:KulisGraumanRP",
        "Kulis–Grauman kernelized random projection with sampled landmarks",
        ("kernel", "degree", "gamma", "coef0", "n_components", "n_landmarks", "n_terms",
         "random_state"),
        {"n_hyperplanes": "n_landmarks"},
        data_dependent=True,
        fit_pass="{n_landmarks} landmark rows, drawn uniformly without replacement by the seed",
    ),
    "prp": MethodInfo(
        "dkrp.features.independent:IndependentPolynomialProjection",
        "P-RP-style projection with fresh hyperplanes per product term",
        ("degree", "n_components", "n_terms", "distribution", "density", "random_state"),
    ),
    "maclaurin": MethodInfo(
        "dkrp.features.maclaurin:RandomMaclaurin",
        "Random Maclaurin features for dot-product kernels (Kar & Karnick 2012)",
        ("kernel", "degree", "gamma", "coef0", "n_components", "random_state"),
    ),
    "tensorsketch": MethodInfo(
        "dkrp.features.tensorsketch:TensorSketch",
        "TensorSketch for polynomial kernels (Pham & Pagh 2013)",
        ("kernel", "degree", "gamma", "coef0", "n_components", "random_state"),
    ),
    "srf": MethodInfo(
        "dkrp.features.spherical:SphericalRandomFeatures",
        "Spherical Random Features, polynomial kernel on the unit sphere (Pennington 2015)",
        ("degree", "scale", "n_components", "n_terms", "feature_map", "random_state"),
    ),
    "spe": MethodInfo(
        "dkrp.features.sign_product:SignProductEmbedding",
        "Sign Product Embedding: quadratic ROP sketches B(x) and 1-bit sign(B(x)) "
        "(Delogne & Jacques)",
        ("n_components", "random_state"),
    ),
    "pca": MethodInfo(
        "dkrp.baselines.pca:PCAProjector",
        "PCA (covariance eigendecomposition) for the PCA-then-kernel-SVM comparison",
        ("n_components", "random_state"),
        data_dependent=True,
        fit_pass="column sums and X^T X",
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
