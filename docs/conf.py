"""Sphinx configuration of the spheredens site (``make docs``: docs/_build/html/index.html).

The pages are the markdown files of docs/ (myst-parser), the gallery is built from the scripts
of examples/ (sphinx-gallery: each runs during the build, and a failing script fails it), the
API reference from the numpydoc docstrings (autodoc, autosummary, napoleon).
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))  # the package of this checkout (what .venv installs, editable)

import spheredens  # noqa: E402

project = "spheredens"
author = "the spheredens developers"
copyright = "spheredens developers"
release = version = spheredens.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "_templates"]

#: pages another piece of work writes and commits later: the entry page's toctree names them, and
#: the entry is left out while the page is not there (any other missing page is an error)
PAGES_TO_COME: tuple[str, ...] = ()


def drop_absent_pages(app, docname, source):
    """source-read: the toctree entries of :data:`PAGES_TO_COME` not (yet) in docs/ removed."""
    if docname != root_doc:
        return
    for page in PAGES_TO_COME:
        if not (DOCS / f"{page}.md").exists():
            source[0] = re.sub(rf"^{page}\n", "", source[0], flags=re.MULTILINE)

# -- markdown ---------------------------------------------------------------------------------
# anchors for the links between pages (dataset.md#w2-of-a-grid-density, README's #... links)
myst_heading_anchors = 4

# links from the README and the pages to repository files that are not pages of the site
# (benchmarks/README.md, tests/..., runs/...) stay plain text: not a warning
nitpick_ignore_regex = [("myst", r"(.*/)?(benchmarks|tests|runs)/.*")]


def register_heading_anchors(app, env):
    """Make every heading anchor that is unique on the site a site-wide label, so that a link
    ``[...](#slug)`` of the README reaches the page where the README's section is included
    (the README is included in parts, each on the page of its topic)."""
    std = env.get_domain("std")
    places: dict[str, list] = {}
    for docname in sorted(env.found_docs):
        for slug, (_, targetid, title) in env.metadata.get(docname, {}).get("myst_slugs", {}).items():
            places.setdefault(slug, []).append((docname, targetid, title))
    for slug, where in places.items():
        if len(where) == 1 and slug not in std.labels and slug not in std.anonlabels:
            docname, targetid, title = where[0]
            std.labels[slug] = (docname, targetid, title)
            std.anonlabels[slug] = (docname, targetid)


# -- API reference -----------------------------------------------------------------------------
autosummary_generate = True
templates_path = ["_templates"]  # autosummary pages end with the gallery examples using the name
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False

#: ``|x|`` in a docstring is a norm or an absolute value (plain-text maths, STYLE.md), never a
#: reST substitution: escaped outside literals, doctests and literal blocks
_NORM = re.compile(r"(?<![\\|`])\|(?=[^\s|`])([^|`\n]*?[^\s|`\\])\|(?![|`_])")
_LITERAL = re.compile(r"(``.*?``)")


def escape_norms(app, what, name, obj, options, lines):
    """autodoc-process-docstring: ``|B^T x|`` -> ``\\|B^T x\\|`` where reST would read a
    substitution reference."""
    literal_indent = None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if literal_indent is not None:
            if stripped and indent <= literal_indent:
                literal_indent = None
            else:
                continue
        if stripped.startswith((">>>", "...")):
            continue
        parts = _LITERAL.split(line)
        lines[i] = "".join(part if k % 2 else _NORM.sub(r"\\|\1\\|", part) for k, part in enumerate(parts))
        if line.rstrip().endswith("::"):
            literal_indent = indent

# -- gallery ------------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    # figures: open matplotlib figures, and the PNG files spheredens' figure functions write
    "image_scrapers": ("matplotlib", "gallery_files.png_files"),
    # a failing example fails the build (the defaults, stated)
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "download_all_examples": False,
    "backreferences_dir": "generated/backreferences",
    "doc_module": ("spheredens",),
    "remove_config_comments": True,
}

# -- HTML ---------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"spheredens {release}"
html_static_path: list[str] = []


# -- the command-line reference -------------------------------------------------------------------
def write_cli_help(folder: Path) -> None:
    """generated/cli_help.txt: ``spheredens --help`` and every command's help, as printed at a
    terminal 100 columns wide (docs/cli.md includes it)."""
    from spheredens.cli import build_parser

    os.environ["COLUMNS"] = "100"
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    texts = [f"$ spheredens --help\n{parser.format_help()}"]
    texts += [f"$ spheredens {name} --help\n{p.format_help()}" for name, p in sub.choices.items()]
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "cli_help.txt"
    text = "\n".join(texts)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")


# -- the API reference: every name of spheredens.__all__ ----------------------------------------
API_PAGE = """API reference
=============

The public names of ``spheredens`` (``spheredens.__all__``, in its order), from their
docstrings. Each command of the ``spheredens`` program is one function here, with the
command's defaults (``spheredens.COMMANDS`` maps each command to its function); the
:doc:`Python API <../python>` page shows them together and the
:doc:`gallery <../auto_examples/index>` uses them in complete scripts.

.. currentmodule:: spheredens
"""


def write_api_page(folder: Path) -> None:
    """generated/api.rst: autosummary tables of every name of ``spheredens.__all__`` (functions,
    classes, errors and warnings), so that a name added to ``__all__`` is documented at the next
    build; autosummary writes each name's page beside it."""
    groups: dict[str, list[str]] = {"Functions": [], "Classes": [], "Errors and warnings": []}
    for name in spheredens.__all__:
        obj = getattr(spheredens, name)
        if isinstance(obj, type):
            groups["Errors and warnings" if issubclass(obj, BaseException) else "Classes"].append(name)
        elif callable(obj):
            groups["Functions"].append(name)
    text = API_PAGE + "".join(
        f"\n{title}\n{'-' * len(title)}\n\n.. autosummary::\n   :toctree: .\n\n"
        + "".join(f"   {n}\n" for n in names) for title, names in groups.items())
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "api.rst"
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")


write_cli_help(DOCS / "generated")
write_api_page(DOCS / "generated")


def setup(app):
    app.connect("source-read", drop_absent_pages)
    app.connect("autodoc-process-docstring", escape_norms)
    app.connect("env-updated", register_heading_anchors)
