"""The documentation site, without building it.

The build itself is ``make docs`` (Sphinx with warnings as errors, every gallery script run),
which ``.ci/run`` runs after the test suite. These checks are what the build cannot see: a
gallery script that does not say what it shows, how long it takes and what it is checked
against (STYLE.md, section 9), a page of docs/ left out of the site, and the README's link to
the site. (The API reference lists ``spheredens.__all__`` itself: docs/conf.py writes its
tables at each build.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))


def test_the_gallery_has_the_five_examples():
    names = {p.stem for p in EXAMPLES}
    assert {
        "plot_circle_example_c",
        "plot_sphere_great_circle",
        "plot_particles_vs_density",
        "plot_beta_sweep",
        "plot_anti_collapse_slices",
    } <= names
    assert (ROOT / "examples" / "README.txt").is_file()  # the gallery's header


def test_every_example_opens_with_a_title_its_runtime_and_reference():
    for path in EXAMPLES:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        lines = doc.splitlines()
        assert len(lines) > 2 and set(lines[1]) == {"="} and len(lines[1]) >= len(lines[0]), (
            f"{path.name}: the docstring must open with an reST title"
        )
        for word in ("What it shows", "Reference", "Runtime"):
            assert word in doc, f"{path.name}: the docstring does not say {word!r}"


def test_every_page_of_docs_is_in_the_site():
    """Each markdown page of docs/ is named by a toctree of the entry page (Sphinx would warn
    too; this names the page)."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    entries = set(re.findall(r"^([\w/]+)$", index, re.MULTILINE))
    for page in DOCS.glob("*.md"):
        if page.stem != "index":
            assert page.stem in entries, f"docs/index.md has no toctree entry for {page.name}"


def test_the_readme_links_the_site_and_the_gallery():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/index.md)" in readme and "make docs" in readme
    # the figures the gallery draws are not repeated as static images in the README
    for figure in ("docs/figures/circle_example_c.png", "docs/figures/sphere_great_circle.png"):
        assert f"]({figure})" not in readme, figure
    for example in ("examples/plot_circle_example_c.py", "examples/plot_sphere_great_circle.py"):
        assert example in readme and (ROOT / example).is_file()
