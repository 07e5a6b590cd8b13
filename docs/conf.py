"""Sphinx configuration of dkrp's documentation: the guide, the API reference, the gallery.

Build (from the repository root, after ``pip install ".[docs]"``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The default build reads nothing from the network. Cross-links to the documentation of
numpy, scipy, scikit-learn, dask and zarr (intersphinx) are opt-in, because fetching their
inventories needs the internet and, under ``-W``, a failed fetch fails the build::

    DKRP_DOCS_INTERSPHINX=1 python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# the dkrp of this source tree, also when an installed dkrp is older or absent
sys.path.insert(0, str(ROOT))

import dkrp  # noqa: E402 - after the path above

project = "dkrp"
author = "dkrp developers"
copyright = "dkrp developers"
release = dkrp.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_click",
    "sphinx_gallery.gen_gallery",
]

#: opt-in: cross-links to the libraries dkrp builds on (needs the network)
INTERSPHINX = os.environ.get("DKRP_DOCS_INTERSPHINX") == "1"
if INTERSPHINX:
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable/", None),
        "scipy": ("https://docs.scipy.org/doc/scipy/", None),
        "sklearn": ("https://scikit-learn.org/stable/", None),
        "dask": ("https://docs.dask.org/en/stable/", None),
        "distributed": ("https://distributed.dask.org/en/stable/", None),
        "zarr": ("https://zarr.readthedocs.io/en/stable/", None),
    }

templates_path = ["_templates"]
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.md5", "auto_examples/*.json"]
root_doc = "index"
# the guide quotes commands and code in ``literals``; plain `text` is an emphasis
default_role = "literal"

# -- API reference --------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc's Parameters section says the types
# numpydoc: class members are listed by the class template (docs/_templates), and the
# Attributes section stays a list (an attribute documented twice is a -W error)
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# -- doctest: the guide's ``.. doctest::`` blocks ---------------------------------------
# The docstrings' own examples run under pytest (``--doctest-modules``), in their
# module's namespace; here only the guide's explicit blocks run.
doctest_test_doctest_blocks = ""
doctest_global_setup = "import numpy as np\nimport dkrp"

# -- gallery ----------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "../examples",  # relative to this folder
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    # a failing example fails the build (the default, said here on purpose)
    "only_warn_on_example_error": False,
    "show_memory": False,
}

# -- HTML -------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"dkrp {release}"
html_static_path = []
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"index": []}
html_show_sourcelink = False


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """Leave out the ``set_*_request`` methods scikit-learn adds to every estimator: their
    docstrings cite scikit-learn's user guide, which this site cannot link to."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def _attribute_comment(name, obj):
    """The ``#:`` comment documenting ``obj`` under its last name in the dkrp module that
    defines it (a re-exported constant's comment is in the module it comes from)."""
    from sphinx.errors import PycodeError
    from sphinx.pycode import ModuleAnalyzer

    short = name.rpartition(".")[2]
    for module_name, module in sorted(sys.modules.items()):
        # vars(), not getattr(): a module's __getattr__ (dkrp.evaluation's moved names) warns
        if not module_name.startswith("dkrp") or vars(module).get(short) is not obj:
            continue
        try:
            comment = ModuleAnalyzer.for_module(module_name).find_attr_docs().get(("", short))
        except PycodeError:
            continue
        if comment:
            return list(comment)
    return []


def _constant_docstrings(app, what, name, obj, options, lines):
    """A constant without its own ``#:`` comment would show the docstring of its type
    (``str``, ``int``, ``dict``): show the comment where it is defined, else a short value."""
    if what not in ("data", "attribute") or not lines:
        return
    type_doc = inspect.getdoc(type(obj)) or ""
    if " ".join(" ".join(lines).split()) == " ".join(type_doc.split()):
        lines[:] = _attribute_comment(name, obj)
        if not lines and len(repr(obj)) <= 80:
            lines[:] = [f"Its value (when these pages were built): ``{obj!r}``."]


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
    # before numpydoc (priority 500) reads the docstring
    app.connect("autodoc-process-docstring", _constant_docstrings, priority=400)
