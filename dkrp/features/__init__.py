"""Data-independent feature maps: defined by a seed and a few parameters."""

from .fourier import RandomFourierFeatures
from .independent import IndependentPolynomialProjection
from .maclaurin import RandomMaclaurin
from .polynomial import ExplicitPolynomialProjection, PolynomialRandomProjection
from .sign_product import SignProductEmbedding
from .spherical import SphericalRandomFeatures
from .tensorsketch import TensorSketch

__all__ = [
    "ExplicitPolynomialProjection",
    "IndependentPolynomialProjection",
    "PolynomialRandomProjection",
    "RandomFourierFeatures",
    "RandomMaclaurin",
    "SignProductEmbedding",
    "SphericalRandomFeatures",
    "TensorSketch",
]
