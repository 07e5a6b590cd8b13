"""Data-independent feature maps: defined by a seed and a few parameters."""

from .fourier import RandomFourierFeatures
from .polynomial import ExplicitPolynomialProjection, PolynomialRandomProjection

__all__ = [
    "ExplicitPolynomialProjection",
    "PolynomialRandomProjection",
    "RandomFourierFeatures",
]
