"""Where each public name of :mod:`dkrp` lives: a table, imported by nothing heavy.

``import dkrp`` imports none of these modules; :func:`dkrp.__getattr__` (PEP 562)
imports one when its name is first used, and :func:`dkrp._spec.rebuild` imports the
module of a projector class a spec names before it is registered. Keeping the table
here, with no imports, lets both use it without importing each other.
"""

#: public projector classes (subclasses of BaseProjector) -> defining module
PROJECTOR_MODULES = {
    "ExplicitPolynomialProjection": "dkrp.features.polynomial",
    "IndependentPolynomialProjection": "dkrp.features.independent",
    "KulisGraumanRP": "dkrp.baselines.kulis_grauman",
    "Nystroem": "dkrp.baselines.nystroem",
    "PCAProjector": "dkrp.baselines.pca",
    "PolynomialRandomProjection": "dkrp.features.polynomial",
    "RandomFourierFeatures": "dkrp.features.fourier",
    "RandomMaclaurin": "dkrp.features.maclaurin",
    "SignProductEmbedding": "dkrp.features.sign_product",
    "SphericalRandomFeatures": "dkrp.features.spherical",
    "TensorSketch": "dkrp.features.tensorsketch",
}

#: every public name of dkrp (``dkrp.__all__`` but ``__version__``) -> defining module
PUBLIC_MODULES = {
    **PROJECTOR_MODULES,
    "AsymmetricSketchClassifier": "dkrp.asymmetric",
    "BaseProjector": "dkrp.base",
    "PrimalLinearSVC": "dkrp.linear_svm",
    "RandomFeatureVotingClassifier": "dkrp.ensemble",
    "featurize_to_store": "dkrp.jobs",
    "read_features": "dkrp.feature_store",
    "open_xarray": "dkrp.feature_store",
    "unpack_bits": "dkrp.features.sign_product",
    "SpecError": "dkrp.errors",
    "from_spec": "dkrp.base",
    "load": "dkrp.base",
}
