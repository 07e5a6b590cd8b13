"""The documentation: every public name has an API entry; the built pages render.

The API check reads ``docs/api/*.rst`` (fast set): every name in ``dkrp.__all__`` and in
the ``__all__`` of every public module must be listed in an ``autosummary`` block (or be
the ``dkrp`` command's click group, documented by ``.. click::``), either under its own
module or, for a class or function exported in several places, under any one of them.

The browser check (full suite) opens the built index and a gallery page in headless
Chromium; it needs the HTML build (``python -m sphinx -b html docs docs/_build/html``)
and Debian's ``chromium``, and skips, saying which is missing, without them.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dkrp

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
API = DOCS / "api"
BUILT = DOCS / "_build" / "html"

sys.path.insert(0, str(DOCS))
from check_links import broken_links  # noqa: E402 - docs/ is not a package

_DIRECTIVE = re.compile(r"^\.\. (\S+)::\s*(.*)$")


def public_modules() -> list[str]:
    """``dkrp`` and every module under it with no ``_``-prefixed part in its name."""
    names = ["dkrp"]
    for info in pkgutil.walk_packages(dkrp.__path__, "dkrp."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def api_sources(folder: Path = API) -> list[Path]:
    """The API reference's pages and the CLI reference (``docs/cli.rst``)."""
    return [*sorted(folder.glob("*.rst")), DOCS / "cli.rst"]


def documented_names(paths=None) -> set[str]:
    """Fully qualified names listed in the ``autosummary`` blocks (and ``click``
    directives) of the ``.rst`` files ``paths`` (default: :func:`api_sources`)."""
    names = set()
    for path in api_sources() if paths is None else paths:
        module, in_autosummary = None, False
        for line in path.read_text(encoding="utf-8").splitlines():
            match = _DIRECTIVE.match(line.strip()) if not line.startswith("   ") else None
            if match:
                directive, argument = match.groups()
                in_autosummary = directive == "autosummary"
                if directive in ("currentmodule", "module", "py:module", "automodule"):
                    module = argument.strip()
                elif directive == "click":
                    names.add(argument.strip().replace(":", "."))
                continue
            if in_autosummary and line.startswith("   ") and not line.strip().startswith(":"):
                entry = line.strip()
                if entry:
                    names.add(entry if module is None else f"{module}.{entry}")
            elif line.strip() and not line.startswith(" "):
                in_autosummary = False
    return names


def _resolve(qualified: str):
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


def undocumented(documented: set[str]) -> list[str]:
    """``module.name`` for every public name without an API entry."""
    # a re-export is documented where it is first exported: a class or function under any
    # name, a constant under the same name (the same object)
    shared = {}
    for qualified in documented:
        try:
            obj = _resolve(qualified)
        except (ImportError, AttributeError):
            continue
        shared[_key(qualified.rpartition(".")[2], obj)] = obj
    missing = []
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            qualified = f"{module_name}.{name}"
            obj = getattr(module, name)
            if qualified not in documented and shared.get(_key(name, obj)) is not obj:
                missing.append(qualified)
    return missing


def _key(name: str, obj) -> tuple:
    if inspect.isclass(obj) or inspect.isroutine(obj):
        return ("object", id(obj))
    return (name, id(obj))


def test_every_public_name_has_an_api_entry():
    missing = undocumented(documented_names())
    assert not missing, (
        f"{len(missing)} public name(s) have no entry in the API reference (docs/api/*.rst); "
        f"add each to an autosummary block of its module's page: {', '.join(missing)}"
    )


def test_every_api_entry_names_something():
    stale = []
    for qualified in sorted(documented_names()):
        try:
            _resolve(qualified)
        except (ImportError, AttributeError):
            stale.append(qualified)
    assert not stale, f"API entries naming nothing (renamed or removed?): {', '.join(stale)}"


def test_the_check_sees_a_missing_name(tmp_path):
    # the same check on a copy of the API pages with dkrp.load's line taken out
    copies = []
    for path in api_sources():
        text = path.read_text(encoding="utf-8")
        copies.append(tmp_path / path.name)
        copies[-1].write_text(re.sub(r"(?m)^   load\n", "", text), encoding="utf-8")
    # dkrp.base exports the same function, documented only as dkrp.load
    assert undocumented(documented_names(copies)) == ["dkrp.load", "dkrp.base.load"]


def test_link_checker_finds_a_broken_link(tmp_path):
    (tmp_path / "index.html").write_text(
        '<a href="page.html#here">ok</a> <a href="gone.html">gone</a> '
        '<a href="page.html#nowhere">bad anchor</a> <img src="_images/a.png"> '
        '<a href="https://example.org/">the internet is not followed</a>', encoding="utf-8")
    (tmp_path / "page.html").write_text('<h1 id="here">Here</h1>', encoding="utf-8")
    problems = broken_links(tmp_path)
    assert len(problems) == 3, problems
    assert "gone.html" in problems[0] and "nowhere" in problems[1] and "a.png" in problems[2]


# -- the built pages, in a browser (full suite) --------------------------------------------

def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _screenshot(browser: str, page: Path, png: Path, size=(1280, 900)):
    command = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
               "--disable-dev-shm-usage", f"--screenshot={png}",
               f"--window-size={size[0]},{size[1]}", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(png.parent)})
    assert png.is_file(), f"no screenshot from {' '.join(command)}: {done.stderr[-2000:]}"


def _assert_not_blank(png: Path):
    from matplotlib.image import imread

    with png.open("rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    pixels = imread(png)[..., :3]
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100, pixels.shape
    # a rendered page has text and rules: many distinct colours, not one flat colour
    assert float(pixels.std()) > 0.02, f"{png} looks blank (std {pixels.std():.4f})"
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 16, f"{png} has almost no colours"


@pytest.fixture(scope="module")
def built():
    if not (BUILT / "index.html").is_file():
        pytest.skip(f"the HTML docs are not built ({BUILT / 'index.html'} is absent; "
                    "run python -m sphinx -W --keep-going -b html docs docs/_build/html)")
    return BUILT


@pytest.fixture(scope="module")
def browser(built):
    found = _chromium()
    if found is None:
        pytest.skip("no headless browser: Debian's chromium is not installed "
                    "(apt-get install -y chromium)")
    return found


@pytest.mark.full
def test_index_renders_with_navigation(browser, tmp_path):
    html = (BUILT / "index.html").read_text(encoding="utf-8")
    for page in ("guide/index.html", "api/index.html", "auto_examples/index.html", "cli.html"):
        assert f'href="{page}"' in html, f"the index's navigation lacks a link to {page}"
    assert "bd-header" in html or "navbar" in html, "no navigation bar in the index"
    png = tmp_path / "index.png"
    _screenshot(browser, BUILT / "index.html", png)
    _assert_not_blank(png)


@pytest.mark.full
def test_gallery_page_renders_with_its_images(browser, tmp_path):
    pages = sorted((BUILT / "auto_examples").glob("plot_*.html"))
    assert len(pages) >= 6, f"{len(pages)} gallery pages built, want at least 6"
    page = pages[0]
    html = page.read_text(encoding="utf-8")
    images = re.findall(r'<img[^>]+src="([^"]+)"', html)
    plots = [src for src in images if "sphx_glr_" in src]
    assert plots, f"{page.name} has no plot image"
    for src in images:
        if not re.match(r"[a-z]+:", src):
            assert (page.parent / src).is_file(), f"{page.name}: image {src} is missing"
    png = tmp_path / "gallery.png"
    _screenshot(browser, page, png)
    _assert_not_blank(png)


@pytest.mark.full
def test_every_gallery_page_has_a_plot(built):
    for page in sorted((BUILT / "auto_examples").glob("plot_*.html")):
        html = page.read_text(encoding="utf-8")
        assert re.search(r'<img[^>]+src="[^"]*sphx_glr_plot_', html), f"{page.name}: no plot"
