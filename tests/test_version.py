"""The version moves with releases, from one source (issue 31, part 6)."""

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import dkrp

ROOT = Path(__file__).resolve().parents[1]


def test_version_is_the_installed_distributions():
    # pyproject.toml is the single source: the installed metadata carries it (CI
    # reinstalls the project; a stale editable install reports the version it was
    # installed at until `pip install -e .` again)
    assert dkrp.__version__ == importlib.metadata.version("dkrp")
    from dkrp import __version__

    assert __version__ == dkrp.__version__


def test_a_source_tree_never_installed_says_so():
    # `python -S`: no site-packages, so no installed dkrp metadata; dkrp from the tree
    out = subprocess.run([sys.executable, "-S", "-c", "import dkrp; print(dkrp.__version__)"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    assert out.stdout.strip() == "0+unknown"
