"""The version moves with releases, from one source (issue 31, part 6)."""

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import dkrp

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"


def test_version_is_the_installed_distributions():
    # pyproject.toml is the single source: the installed metadata carries it (CI
    # reinstalls the project; a stale editable install reports the version it was
    # installed at until `pip install -e .` again)
    assert dkrp.__version__ == importlib.metadata.version("dkrp")
    from dkrp import __version__

    assert __version__ == dkrp.__version__


def test_every_release_has_a_changelog_section_and_unreleased_leads():
    headings = re.findall(r"^## (.+)$", CHANGELOG.read_text(), flags=re.MULTILINE)
    assert headings[0] == "Unreleased"
    releases = [h.split(" — ")[0] for h in headings[1:]]
    assert releases[-1] == "0.1.0"
    pyproject = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(),
                          flags=re.MULTILINE)
    assert pyproject.group(1) == releases[0]  # a release bumps pyproject.toml and this file
    assert dkrp.__version__ in releases or dkrp.__version__.startswith("0+")


def test_a_source_tree_never_installed_says_so(tmp_path):
    # `python -S -E`: no site-packages nor PYTHONPATH, so no installed dkrp metadata; dkrp
    # from a copy of the package alone (the checkout may hold a dkrp.egg-info that
    # `pip install .` left, which is metadata too)
    import shutil

    shutil.copytree(ROOT / "dkrp", tmp_path / "dkrp",
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run([sys.executable, "-S", "-E", "-c", "import dkrp; print(dkrp.__version__)"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60, check=True)
    assert out.stdout.strip() == "0+unknown"
