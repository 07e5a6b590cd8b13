"""Resumable, idempotent feature stores: featurize a dask array straight into Zarr v3.

This package owns dkrp's on-disk *features* format and the write protocol that lets
a killed run resume without redoing finished work:

* :mod:`~dkrp.feature_store.format`: the store layout and attributes, the mismatch
  checks, :func:`open_features` and :class:`FeatureSet` (with
  :meth:`FeatureSet.describe`);
* :mod:`~dkrp.feature_store.fingerprint`: the input fingerprint that ties a store
  to its input;
* :mod:`~dkrp.feature_store.encoding`: how a store holds its values (float features
  or packed SPE sign bits, a narrower store dtype, the chunk compressor);
* :mod:`~dkrp.feature_store.options`: :class:`StoreOptions`, what a run asks of its
  store, as one value;
* :mod:`~dkrp.feature_store.plan`: :func:`plan_features`, every check before a
  write;
* :mod:`~dkrp.feature_store.tasks`: the per-chunk write tasks, retries, naming a
  failed partition, progress;
* :mod:`~dkrp.feature_store.write`: :func:`write_features` and :func:`write_plan`,
  the write protocol;
* :mod:`~dkrp.feature_store.verify`: :func:`verify_store` (``dkrp verify``), checking
  every chunk of a store and recomputing a feature store's missing or corrupt ones.

Featurizing a dataset end to end (open the input, fit, plan, check the workers,
write) is :func:`dkrp.featurize_to_store`.
"""

from __future__ import annotations

from ..errors import FeatureStoreError, FeatureStoreMismatchError, PartitionError
from .fingerprint import input_fingerprint
from .format import (
    FEATURES_FORMAT,
    FORMAT_VERSION,
    FeatureSet,
    describe_features,
    open_features,
    open_xarray,
    read_features,
)
from .options import StoreOptions
from .plan import plan_features
from .verify import verify_features, verify_store
from .write import write_features, write_plan

__all__ = [
    "FEATURES_FORMAT",
    "FORMAT_VERSION",
    "FeatureSet",
    "FeatureStoreError",
    "FeatureStoreMismatchError",
    "PartitionError",
    "StoreOptions",
    "describe_features",
    "input_fingerprint",
    "open_features",
    "open_xarray",
    "plan_features",
    "read_features",
    "verify_features",
    "verify_store",
    "write_features",
    "write_plan",
]
