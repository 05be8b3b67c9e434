"""A result card's ``summary.json`` from its archived raw runs (for cards whose benchmark wrote none).

A card is a folder of ``docs/results`` with a ``README.md`` (question, command, commit, machine, result)
or a ``raw.json`` (its raw runs: ``results-data/*.tar.xz`` archives, one per run, with size and sha256). This reads
the archive and writes what every metrics file in it ends with: rows, env steps, updates, wall clock, the
number of tests, the last and the best test return, and the machine where a ``machines.jsonl`` names it.

Usage: ``python research/card_summary.py docs/results/CARD [...]`` (``--all``: every card without a
summary.json; ``--force``: rewrite the ones this script wrote, never a benchmark's own).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from card_archive import archives  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


def cards() -> list[Path]:
    """Every card folder: a folder of docs/results holding a README.md or a raw.json."""
    found = {p.parent for p in RESULTS.rglob("README.md")} | {p.parent for p in RESULTS.rglob("raw.json")}
    return sorted(found - {RESULTS})


def _metrics_summary(name: str, lines: list[str]) -> dict | None:
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    counted = [r for r in rows if isinstance(r, dict) and "env_steps" in r]
    if not counted:
        return None
    last = counted[-1]
    tests = [r["test/return_mean"] for r in rows if isinstance(r, dict) and "test/return_mean" in r]
    return {"file": name, "rows": len(rows), "env_steps": last.get("env_steps"), "updates": last.get("updates"),
            "wall_s": last.get("wall_s"), "tests": len(tests), "last_test": tests[-1] if tests else None,
            "best_test": max(tests) if tests else None}


def summarize(card: Path) -> dict:
    readme = card / "README.md"
    title = next((line[2:].strip() for line in readme.read_text().splitlines() if line.startswith("# ")), None) \
        if readme.exists() else None
    out = {"card": str(card.relative_to(ROOT)), "title": title,
           "generated_by": "research/card_summary.py from the card's archived raw runs"}
    record_path = card / "raw.json"
    if not record_path.exists():
        out["raw"] = None
        return out
    entries = archives(json.loads(record_path.read_text()))
    runs, machines = [], set()
    for entry in entries:
        archive = ROOT / entry["archive"]
        data = archive.read_bytes()
        if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise SystemExit(f"{archive} does not match {record_path} (size or sha256)")
        with tarfile.open(archive, "r:xz") as tar:
            for member in tar.getmembers():
                if not member.isfile() or not member.name.endswith(".jsonl"):
                    continue
                lines = tar.extractfile(member).read().decode("utf-8", errors="replace").splitlines()
                if member.name.endswith("machines.jsonl"):
                    for line in lines:
                        try:
                            machines.add(str(json.loads(line)["cpu"]))
                        except (json.JSONDecodeError, KeyError, TypeError):
                            continue
                    continue
                summary = _metrics_summary(member.name, lines)
                if summary:
                    runs.append(summary)
    raw = [{k: e[k] for k in ("archive", "bytes", "sha256", "raw_bytes")} for e in entries]
    out["raw"] = raw[0] if len(raw) == 1 else raw
    out["runs"] = runs
    if machines:
        out["machines"] = sorted(machines)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cards", nargs="*", type=Path)
    parser.add_argument("--all", action="store_true", help="every card without a summary.json")
    parser.add_argument("--force", action="store_true", help="rewrite the summary.json files this script wrote")
    args = parser.parse_args(argv)
    todo = cards() if args.all else [c.resolve() for c in args.cards]
    for card in todo:
        target = card / "summary.json"
        if target.exists() and not (args.force and "generated_by" in json.loads(target.read_text())):
            continue  # a benchmark's own summary is never replaced
        target.write_text(json.dumps(summarize(card), indent=1) + "\n")
        print(target.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
