"""One registry of projector classes, explicit and safe (issue 31, part 1).

A spec names its class by ``__name__`` alone. dkrp's own maps are listed once, in
:data:`dkrp._names.PROJECTORS`; everything that lists them derives from that table, and
no other class can take one of its names (or a name another class registered), so a
user's same-named subclass never changes what :func:`dkrp.from_spec` builds.
"""

import importlib
import inspect
import pkgutil

import click
import numpy as np
import pytest

import dkrp
from dkrp import _names
from dkrp._spec import register, registered_projectors


@pytest.fixture
def spec():
    X = np.random.default_rng(0).standard_normal((20, 5))
    return dkrp.RandomFourierFeatures(n_components=8, random_state=0).fit(X).to_spec()


def test_a_same_named_subclass_never_changes_what_a_dkrp_spec_builds(spec):
    """The issue's scenario: ``class RandomFourierFeatures(dkrp.RandomFourierFeatures)``
    defined after import made every later ``from_spec`` of a real spec build it."""
    with pytest.raises(TypeError, match=r"Cannot register the projector class "
                       r"test_registry:.*RandomFourierFeatures as 'RandomFourierFeatures': "
                       r"that spec name is taken by dkrp.features.fourier:RandomFourierFeatures"
                       r".*Give the class another name \(e.g. MyRandomFourierFeatures\)"):

        class RandomFourierFeatures(dkrp.RandomFourierFeatures):
            pass

    assert type(dkrp.from_spec(spec)) is dkrp.RandomFourierFeatures
    assert registered_projectors()["RandomFourierFeatures"] is dkrp.RandomFourierFeatures


def test_registering_a_dkrp_name_is_refused_and_its_own_class_accepted():
    mine = type("Nystroem", (), {"__module__": "elsewhere", "__qualname__": "Nystroem"})
    with pytest.raises(TypeError, match="'Nystroem': that spec name is taken by "
                                        "dkrp.baselines.nystroem:Nystroem"):
        register(mine)
    assert register(dkrp.Nystroem) is dkrp.Nystroem  # the table's class, again: accepted
    assert registered_projectors()["Nystroem"] is dkrp.Nystroem


def test_a_name_another_class_registered_is_refused():
    from dkrp.testing import faulty  # registers FaultyProjection on import

    with pytest.raises(TypeError, match="'FaultyProjection': that spec name is taken by "
                                        "dkrp.testing.faulty:FaultyProjection"):

        class FaultyProjection(dkrp.PolynomialRandomProjection):
            pass

    assert registered_projectors()["FaultyProjection"] is faulty.FaultyProjection
    spec = faulty.FaultyProjection(n_components=4, n_hyperplanes=8,
                                   random_state=0).fit_n_features(3).to_spec()
    assert type(dkrp.from_spec(spec)) is faulty.FaultyProjection


def test_another_projector_registers_itself_and_its_specs_rebuild():
    from dkrp import _spec

    try:
        for _ in range(2):  # the same definition again (a rerun cell) replaces it

            class ThirdPartyMap(dkrp.PolynomialRandomProjection):
                pass

            spec = ThirdPartyMap(n_components=4, n_hyperplanes=8,
                                 random_state=0).fit_n_features(3).to_spec()
            assert type(dkrp.from_spec(spec)) is ThirdPartyMap
    finally:
        _spec._REGISTRY.pop("ThirdPartyMap", None)  # leave no test class registered


def test_the_table_names_each_class_where_it_lives():
    for name, target in _names.PROJECTORS.items():
        module, _, qualname = target.partition(":")
        assert qualname == name and _names.PROJECTOR_MODULES[name] == module
        cls = getattr(importlib.import_module(module), qualname)
        assert issubclass(cls, dkrp.BaseProjector) and cls.__name__ == name
        assert registered_projectors()[name] is cls


def test_every_projector_dkrp_defines_is_in_the_table():
    """A new map left out of the table would register as a third-party class and be
    missing from METHODS, ``dkrp.__all__`` and the CLI."""
    for info in pkgutil.walk_packages(dkrp.__path__, "dkrp."):
        if not info.name.startswith(("dkrp.testing", "dkrp.cli.__main__", "dkrp.__main__")):
            importlib.import_module(info.name)
    stack, found = [dkrp.BaseProjector], set()
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if (cls.__module__.startswith("dkrp.") and not cls.__module__.startswith("dkrp.testing")
                and not cls.__name__.startswith(("_", "Base")) and not inspect.isabstract(cls)):
            found.add(cls.__name__)
    assert found == set(_names.PROJECTORS)


def test_the_table_methods_public_names_and_cli_choices_agree():
    from dkrp.cli import main
    from dkrp.methods import METHODS, method_names

    PROJECTORS = _names.PROJECTORS
    projectors = [info.projector for info in METHODS.values()]
    assert sorted(projectors) == sorted(PROJECTORS)  # one method per map, each map once
    assert all(info.target == PROJECTORS[info.projector] for info in METHODS.values())
    assert set(PROJECTORS) <= set(dkrp.__all__)
    assert [n for n in dkrp.__all__ if n in PROJECTORS] == list(PROJECTORS)
    choices = [param.type.choices for command in main.commands.values()
               for param in command.params
               if param.name == "method" and isinstance(param.type, click.Choice)]
    assert len(choices) >= 2  # featurize and train
    assert all(list(c) == method_names() for c in choices)
