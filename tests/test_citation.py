"""CITATION.cff is valid Citation File Format 1.2.0 (the keys the schema requires, with their
types), names the package's version, and cites the papers whose equations spheredens solves;
the README's references name the same papers."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import spheredens

ROOT = Path(__file__).resolve().parents[1]
PAPERS = ("arXiv:2605.10931", "arXiv:2605.30229", "arXiv:2305.05465", "arXiv:2312.10794")


def test_citation_file_is_valid_cff_and_cites_the_papers():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # required by the CFF 1.2.0 schema
        assert cff.get(key), key
    assert isinstance(cff["message"], str) and isinstance(cff["title"], str)
    assert all(
        isinstance(a, dict) and (a.get("name") or a.get("family-names")) for a in cff["authors"]
    )
    assert cff["type"] in ("software", "dataset")
    assert str(cff["version"]) == spheredens.__version__
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(cff["date-released"]))
    cited = {i["value"] for ref in cff["references"] for i in ref["identifiers"]}
    assert set(PAPERS) <= cited
    for ref in cff["references"]:
        assert ref["type"] and ref["title"] and ref["authors"] and isinstance(ref["year"], int)
        assert all({"family-names", "given-names"} <= set(a) for a in ref["authors"])


def test_the_readme_and_the_site_cite_the_papers():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for text in (readme, index):
        assert "## References" in text
        for paper in PAPERS:
            assert paper in text, paper
