"""dkrp: distributed kernelized random projections and random features on Dask.

A random feature map turns each row x into z(x) so that linear models on z
approximate kernel models. dkrp's maps are defined by a seed and a few
parameters (a JSON spec), so every Dask worker regenerates the same hyperplanes
and featurizes its partition independently.
"""

__version__ = "0.1.0"

from .asymmetric import AsymmetricSketchClassifier  # noqa: E402
from .base import BaseProjector, SpecError, from_spec, load  # noqa: E402
from .baselines import KulisGraumanRP, Nystroem, PCAProjector  # noqa: E402
from .ensemble import RandomFeatureVotingClassifier  # noqa: E402
from .feature_store import read_features  # noqa: E402
from .features import (  # noqa: E402
    ExplicitPolynomialProjection,
    IndependentPolynomialProjection,
    PolynomialRandomProjection,
    RandomFourierFeatures,
    RandomMaclaurin,
    SignProductEmbedding,
    SphericalRandomFeatures,
    TensorSketch,
)
from .jobs import featurize_to_store  # noqa: E402

__all__ = [
    "AsymmetricSketchClassifier",
    "BaseProjector",
    "ExplicitPolynomialProjection",
    "IndependentPolynomialProjection",
    "KulisGraumanRP",
    "Nystroem",
    "PCAProjector",
    "PolynomialRandomProjection",
    "RandomFeatureVotingClassifier",
    "RandomFourierFeatures",
    "RandomMaclaurin",
    "SignProductEmbedding",
    "SphericalRandomFeatures",
    "TensorSketch",
    "featurize_to_store",
    "read_features",
    "SpecError",
    "from_spec",
    "load",
    "__version__",
]
