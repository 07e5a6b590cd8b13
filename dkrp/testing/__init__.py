"""Reusable test helpers for feature maps: statistical checks over many seeds.

New maps (spherical random features, sign product embeddings, ...) test what they
estimate with the same tools the core maps use.
"""

from .statistics import assert_unbiased, estimates_over_seeds

__all__ = ["assert_unbiased", "estimates_over_seeds"]
