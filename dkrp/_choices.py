"""The words that options take, in a module that imports nothing.

The command line builds its ``click.Choice`` lists from these, so ``dkrp --help``
needs neither numpy nor the feature modules; those modules import the same tuples,
so each list is written once.
"""

#: distributions of hyperplane entries (dkrp.features._samplers)
DISTRIBUTIONS = ("gaussian", "achlioptas")
#: how a hyperplane pool is built (dkrp.features._pools); FOURIER_POOLS for RFF
POOLS = ("iid", "orthogonal", "tight_frame", "structured")
FOURIER_POOLS = ("iid", "orthogonal", "structured")
#: which explicit map phi(x) ExplicitPolynomialProjection projects
EXPLICIT_FORMS = ("tensor", "monomials")
#: how KRP components pick pool rows
INDEX_DESIGNS = ("random", "balanced")
#: the dtypes projectors compute in, by name (dkrp._validation.FLOAT_DTYPES)
FLOAT_DTYPE_NAMES = ("float64", "float32")
#: the formats dkrp.io.ingest reads, in the order of its messages
INPUT_FORMATS = ("libsvm", "csv", "npy", "parquet", "idx")
#: the formats dkrp export writes (dkrp.feature_store.export)
EXPORT_FORMATS = ("npy", "parquet", "libsvm")
#: dtypes a feature store may hold its features in (``--store-dtype``; dkrp.feature_store.encoding)
STORE_DTYPE_NAMES = ("float16", "float32", "float64")
#: compressors of a feature store's chunks (``--compressor``; dkrp.feature_store.encoding)
COMPRESSORS = ("none", "zstd", "gzip", "blosc-lz4", "blosc-zstd")
#: values of ``scale_rows`` (``--scale-rows``, dkrp.preprocessing)
SCALE_ROWS = ("unit",)
