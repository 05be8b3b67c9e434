"""Results are small cards: no raw run logs in docs/results, every card has its summary.json, every raw
archive matches its record, and every relative link in the README and the guides resolves."""

import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def _cards():
    found = {p.parent for p in RESULTS.rglob("README.md")} | {p.parent for p in RESULTS.rglob("raw.json")}
    return sorted(found - {RESULTS})


def test_no_raw_run_logs_in_docs_results():
    raw = [str(p.relative_to(ROOT)) for p in RESULTS.rglob("*") if p.suffix in (".jsonl", ".log")]
    assert raw == []


def test_every_card_has_its_summary_and_its_archive_matches_the_record():
    assert len(_cards()) > 50
    missing = [str(c.relative_to(ROOT)) for c in _cards() if not (c / "summary.json").exists()]
    assert missing == []
    for record_path in RESULTS.rglob("raw.json"):
        record = json.loads(record_path.read_text())
        data = (ROOT / record["archive"]).read_bytes()
        assert len(data) == record["bytes"], record_path
        assert hashlib.sha256(data).hexdigest() == record["sha256"], record_path


def test_every_relative_link_in_the_readme_and_the_guides_resolves():
    broken = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", md.read_text()):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            path = target.split("#", 1)[0]
            where = md.parent / path
            # a folder counts only if it holds a file: git keeps no empty folders, so a fresh clone has none
            if path and not (where.is_file() or (where.is_dir() and any(p.is_file() for p in where.rglob("*")))):
                broken.append(f"{md.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 200 and len(text.encode()) <= 16_000
    assert max(len(line) for line in lines) <= 400
    results = text.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in results.splitlines() if line.startswith("| ") and not line.startswith(("| what", "| ---"))]
    assert 0 < len(rows) <= 12
    assert all("](docs/results/" in row for row in rows)  # each row links its card
