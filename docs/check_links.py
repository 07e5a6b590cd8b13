"""Check every internal link and image of the built HTML docs; print what is broken.

Usage (from the repository root, after the HTML build)::

    python docs/check_links.py docs/_build/html

An internal reference is an ``href`` or ``src`` without a scheme (``http:``, ``mailto:``,
...): the file it names must exist in the built tree, and its ``#fragment``, if any, must
be an ``id`` (or an ``<a name>``) of that page. Links to the internet are not followed
(CI has no internet). Exits 1 when anything is broken, naming the page, the link and why.
"""

from __future__ import annotations

import html
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

#: pages Sphinx or the theme write whose links are not the docs' own
SKIPPED_PAGES = ("_static/", "_sources/", "_images/", "_downloads/")


#: anchors and links: attributes of any tag (Sphinx writes them double-quoted, and escapes
#: quotes in text, so these patterns find attributes only)
_IDS = re.compile(r'\s(?:id|name)="([^"]+)"')
_LINKS = re.compile(r'\s(href|src)="([^"]*)"')


class _Page:
    def __init__(self, text: str):
        self.ids = set(html.unescape(value) for value in _IDS.findall(text))
        self.links = [(name, html.unescape(value)) for name, value in _LINKS.findall(text)]


_is_file = lru_cache(maxsize=None)(Path.is_file)
_is_dir = lru_cache(maxsize=None)(Path.is_dir)


@lru_cache(maxsize=None)
def _parse(path: Path) -> _Page:
    return _Page(path.read_text(encoding="utf-8", errors="replace"))


def broken_links(root) -> list[str]:
    """Every broken internal link under the built HTML tree ``root``, one line each."""
    root = Path(root).resolve()
    problems = []
    pages = sorted(root.rglob("*.html"))
    if not pages:
        return [f"{root}: no HTML pages (build the docs first)"]
    for page in pages:
        relative = page.relative_to(root).as_posix()
        if relative.startswith(SKIPPED_PAGES):
            continue
        for attribute, value in _parse(page).links:
            parts = urlsplit(value)
            if parts.scheme or parts.netloc or value.startswith("javascript:"):
                continue  # the internet (not followed) or a script
            if not parts.path and not parts.fragment:
                continue  # href="" or "#": the page itself
            target = page if not parts.path else Path(
                os.path.normpath(page.parent / unquote(parts.path)))
            if _is_dir(target):
                target = target / "index.html"
            if not _is_file(target):
                shown = target.relative_to(root) if target.is_relative_to(root) else target
                problems.append(f"{relative}: {attribute}={value!r}: no file {shown}")
                continue
            if parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in _parse(target).ids:
                    problems.append(f"{relative}: {attribute}={value!r}: no id "
                                    f"{parts.fragment!r} in {target.relative_to(root)}")
    return problems


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0] if argv else "docs/_build/html")
    problems = broken_links(root)
    for line in problems:
        print(line)
    n_pages = sum(1 for _ in root.rglob("*.html"))
    print(f"internal links: {len(problems)} broken in {n_pages} pages under {root}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
