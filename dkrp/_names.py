"""Where each public name of :mod:`dkrp` lives: a table, imported by nothing heavy.

``import dkrp`` imports none of these modules; :func:`dkrp.__getattr__` (PEP 562)
imports one when its name is first used, and :func:`dkrp._spec.rebuild` takes the class
a spec names from :data:`PROJECTORS` (importing its module then). Keeping the table here,
with no imports, lets both use it without importing each other.
"""

#: dkrp's own projectors, the one table of them: spec class name -> ``"module:Class"``.
#: :data:`PROJECTOR_MODULES`, ``dkrp.__all__``, :data:`dkrp.methods.METHODS` (hence the
#: CLI's ``--method`` choices) and the tests' list of maps derive from it. A spec naming
#: one of these always rebuilds this class: :func:`dkrp._spec.register` refuses any other
#: class under these names (a user's same-named subclass, say).
PROJECTORS = {
    "ExplicitPolynomialProjection": "dkrp.features.polynomial:ExplicitPolynomialProjection",
    "IndependentPolynomialProjection":
        "dkrp.features.independent:IndependentPolynomialProjection",
    "KulisGraumanRP": "dkrp.baselines.kulis_grauman:KulisGraumanRP",
    "Nystroem": "dkrp.baselines.nystroem:Nystroem",
    "PCAProjector": "dkrp.baselines.pca:PCAProjector",
    "PolynomialRandomProjection": "dkrp.features.polynomial:PolynomialRandomProjection",
    "RandomFourierFeatures": "dkrp.features.fourier:RandomFourierFeatures",
    "RandomMaclaurin": "dkrp.features.maclaurin:RandomMaclaurin",
    "SignProductEmbedding": "dkrp.features.sign_product:SignProductEmbedding",
    "SphericalRandomFeatures": "dkrp.features.spherical:SphericalRandomFeatures",
    "TensorSketch": "dkrp.features.tensorsketch:TensorSketch",
}

#: public projector classes (subclasses of BaseProjector) -> defining module
PROJECTOR_MODULES = {name: target.partition(":")[0] for name, target in PROJECTORS.items()}

#: every public name of dkrp (``dkrp.__all__`` but ``__version__``) -> defining module
PUBLIC_MODULES = {
    **PROJECTOR_MODULES,
    "AsymmetricSketchClassifier": "dkrp.asymmetric",
    "BaseProjector": "dkrp.base",
    "PrimalLinearSVC": "dkrp.linear_svm",
    "RandomFeatureVotingClassifier": "dkrp.ensemble",
    "featurize_to_store": "dkrp.jobs",
    "StoreOptions": "dkrp.feature_store",
    "ScalingOptions": "dkrp.preprocessing",
    "JobHooks": "dkrp.jobs",
    "read_features": "dkrp.feature_store",
    "open_xarray": "dkrp.feature_store",
    "unpack_bits": "dkrp.features.sign_product",
    "DkrpError": "dkrp.errors",
    "InvalidInputError": "dkrp.errors",
    "InvalidTypeError": "dkrp.errors",
    "CapacityError": "dkrp.errors",
    "SpecError": "dkrp.errors",
    "from_spec": "dkrp.base",
    "load": "dkrp.base",
}
