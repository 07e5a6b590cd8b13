"""Reusable test helpers for feature maps: statistical checks over many seeds.

New maps (spherical random features, sign product embeddings, ...) test what they
estimate with the same tools the core maps use.

:mod:`dkrp.testing.faulty` (imported on its own, not here) has
:class:`~dkrp.testing.faulty.FaultyProjection`, a KRP whose task misbehaves on one
chosen partition (exits its worker process, raises ``OSError``, or stops itself with
``SIGSTOP``), for testing what a cluster and a feature store do when tasks fail.
Workers must import it before they rebuild its spec: start them with
``preload=["dkrp.testing.faulty"]``.
"""

from .statistics import assert_unbiased, estimates_over_seeds

__all__ = ["assert_unbiased", "estimates_over_seeds"]
