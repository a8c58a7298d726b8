"""Every internal link of the README and the documentation pages resolves: the file exists, and
an anchor names a heading of the target page (GitHub's and myst's slugs: lower case, spaces to
hyphens, punctuation other than hyphens and underscores dropped). ``make docs`` runs the
sphinx build with warnings as errors as well; this test fails on a broken anchor without it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")]
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _lines_outside_code(path: Path) -> list[str]:
    """The page's lines outside fenced and indented code blocks."""
    lines, fenced, indented, previous = [], False, False, ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        indented = line.startswith("    ") and (indented or not previous.strip())
        previous = line
        if not (fenced or indented):
            lines.append(line)
    return lines


def _text_outside_code(path: Path) -> str:
    """The page outside code blocks and code spans."""
    return "\n".join(re.sub(r"`[^`]*`", "", line) for line in _lines_outside_code(path))


def slug(title: str) -> str:
    """The anchor of a markdown heading, as GitHub and myst-parser make it."""
    title = re.sub(r"[`*]", "", title.strip().lower())
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    title = re.sub(r"[^\w\- ]", "", title)
    return title.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _lines_outside_code(path):
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            out.add(s if n == 0 else f"{s}-{n}")
            seen[s] = n + 1
    return out


def _links():
    for page in PAGES:
        for target in LINK.findall(_text_outside_code(page)):
            if re.match(r"^[a-z]+:", target) or target.startswith(("auto_examples/", "generated/")):
                continue  # http:, https:, mailto:; the gallery and API pages come from the build
            yield page, target


@pytest.mark.parametrize(
    "page, target", list(_links()), ids=lambda v: v.name if isinstance(v, Path) else str(v)
)
def test_every_internal_link_resolves(page: Path, target: str):
    path, _, anchor = target.partition("#")
    resolved = page if not path else (page.parent / path).resolve()
    assert resolved.exists(), f"{page.relative_to(ROOT)}: no file {path}"
    if anchor and resolved.suffix == ".md":
        assert anchor in anchors(resolved), (
            f"{page.relative_to(ROOT)}: no heading #{anchor} in {resolved.relative_to(ROOT)}"
        )


def test_the_slug_is_that_of_github():
    assert slug("The sphere with a general B: two atoms (issue 16)") == (
        "the-sphere-with-a-general-b-two-atoms-issue-16"
    )
    assert slug("Low temperature on the sphere: `log_sl` (`spheredens.grids.LatLonCells`)") == (
        "low-temperature-on-the-sphere-log_sl-spheredensgridslatloncells"
    )
