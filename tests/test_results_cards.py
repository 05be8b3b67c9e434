"""Results are small cards: no raw run logs in docs/results, every card has its summary.json, every raw
archive matches its record, and every relative link in the README and the guides resolves."""

import hashlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def _cards():
    found = {p.parent for p in RESULTS.rglob("README.md")} | {p.parent for p in RESULTS.rglob("raw.json")}
    return sorted(found - {RESULTS})


def test_no_raw_run_logs_in_docs_results():
    raw = [str(p.relative_to(ROOT)) for p in RESULTS.rglob("*") if p.suffix in (".jsonl", ".log")]
    assert raw == []


def _archive_entries(record: dict) -> list[dict]:
    """A raw.json's archives: its ``archives`` list (one immutable file per run), or the single top-level record
    of a card written before that rule (research/card_archive.py writes both forms' reader)."""
    return record["archives"] if "archives" in record else [record]


def test_every_card_has_its_summary_and_its_archive_matches_the_record():
    assert len(_cards()) > 50
    missing = [str(c.relative_to(ROOT)) for c in _cards() if not (c / "summary.json").exists()]
    assert missing == []
    for record_path in RESULTS.rglob("raw.json"):
        for entry in _archive_entries(json.loads(record_path.read_text())):
            data = (ROOT / entry["archive"]).read_bytes()
            assert len(data) == entry["bytes"], record_path
            assert hashlib.sha256(data).hexdigest() == entry["sha256"], record_path


# Archives rewritten in place before the rule "one file per run, added once" (issue 90): their version counts in
# git may not grow. Every other archive has exactly one version.
REWRITTEN_BEFORE_THE_RULE = {"minatar-60min.tar.xz": 50, "minatar-10m.tar.xz": 14, "connect4-az-lr-decay.tar.xz": 3,
                             "connect4-muzero-value.tar.xz": 2, "connect4-symmetry-openings.tar.xz": 2,
                             "connect4-alphazero-fix.tar.xz": 2, "minatar-probes.tar.xz": 2}
ARCHIVE_CAP = 2 * 1024**2  # bytes, one archive added after the rule
CARD_CAP = 8 * 1024**2  # bytes, all archives of one top-level card


def test_every_archive_belongs_to_a_card_and_cards_stay_small():
    recorded = {entry["archive"] for path in RESULTS.rglob("raw.json")
                for entry in _archive_entries(json.loads(path.read_text()))}
    stored = {f"results-data/{p.name}" for p in (ROOT / "results-data").glob("*.tar.xz")}
    assert stored == recorded
    per_card = {}
    for path in (ROOT / "results-data").glob("*.tar.xz"):
        card = path.name.removesuffix(".tar.xz").split("__")[0]
        per_card[card] = per_card.get(card, 0) + path.stat().st_size
        assert path.name in REWRITTEN_BEFORE_THE_RULE or path.stat().st_size <= ARCHIVE_CAP, path.name
    assert {card: size for card, size in per_card.items() if size > CARD_CAP} == {}


def test_archives_are_written_once():
    """Every archive under results-data/ has one version in git history (a new run adds a new file); the ones
    rewritten before the rule keep at most the versions they had. Needs the history: skipped in a shallow clone."""
    import subprocess

    git = ["git", "-C", str(ROOT)]
    try:
        shallow = subprocess.run([*git, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("git is not installed")
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a full git clone: the archives' history cannot be read")
    log = subprocess.run([*git, "log", "--format=", "--name-only", "--", "results-data"], capture_output=True,
                         text=True, check=True).stdout
    versions = {}
    for line in log.splitlines():
        if line.startswith("results-data/") and line.endswith(".tar.xz"):
            versions[line.split("/", 1)[1]] = versions.get(line.split("/", 1)[1], 0) + 1
    too_many = {name: n for name, n in versions.items() if n > REWRITTEN_BEFORE_THE_RULE.get(name, 1)}
    assert too_many == {}


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


def test_results_are_readable():
    """Issue 90: a card at most 150 lines (sagas split into dated sub-cards), a summary.json at most 20 KB (curves
    go to the archive), index rows at most 400 characters, and docs/results at most 2 MB in all."""
    long = {str(p.relative_to(RESULTS)): n for p in RESULTS.rglob("README.md") if p != RESULTS / "README.md"
            and (n := len(p.read_text().splitlines())) > 150}
    assert long == {}
    big = {str(p.relative_to(RESULTS)): p.stat().st_size for p in RESULTS.rglob("summary.json") if p.stat().st_size > 20_000}
    assert big == {}
    assert max(len(line) for line in (RESULTS / "README.md").read_text().splitlines()) <= 400
    assert sum(p.stat().st_size for p in RESULTS.rglob("*") if p.is_file()) <= 2 * 1024**2
