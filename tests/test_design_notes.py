"""The design notes live in the repository: nothing points outside it, and every section cited exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _texts():
    for folder in ("src", "docs", "tests", "benchmarks", "research", "examples"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md") and "egg-info" not in str(path):
                yield path, path.read_text(encoding="utf-8", errors="replace")
    yield ROOT / "README.md", (ROOT / "README.md").read_text(encoding="utf-8")


def test_nothing_points_to_design_notes_outside_the_repository():
    needle = "shared/" + "DESIGN"  # spelt in two pieces so this file does not find itself
    outside = [str(p.relative_to(ROOT)) for p, text in _texts() if needle in text]
    assert outside == []


def test_every_cited_section_of_the_architecture_page_exists():
    headings = set(re.findall(r"^### §(\d+) ", (ROOT / "docs" / "architecture.md").read_text(), re.M))
    cited = {}
    for path, text in _texts():
        for match in re.finditer(r"architecture\.md (§[\d§,\-– ]+)", text):
            for number in re.findall(r"\d+", match.group(1)):
                cited.setdefault(number, str(path.relative_to(ROOT)))
    assert cited and set(cited) <= headings, {n: p for n, p in cited.items() if n not in headings}


def test_the_architecture_page_names_every_module():
    """docs/architecture.md §7's layout names every module and folder of src/moozi (issue 90: it lagged the tree)."""
    block = (ROOT / "docs" / "architecture.md").read_text().split("### §7", 1)[1].split("```", 2)[1]
    words = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", block))
    src = ROOT / "src" / "moozi"
    missing = [str(p.relative_to(src)) for p in src.rglob("*.py") if p.stem != "__init__" and p.stem not in words]
    missing += [f"{d.relative_to(src)}/" for d in src.rglob("*") if d.is_dir() and d.name != "__pycache__"
                and d.name not in words]
    assert missing == []
