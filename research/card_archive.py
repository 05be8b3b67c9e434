"""Archive runs' records beside a result card, one immutable file per run, and keep its ``raw.json`` true.

A card's raw runs live in ``results-data/*.tar.xz`` archives, recorded in the card's ``raw.json``; raw logs
are never committed as plain text. Each run added becomes its own archive,
``results-data/CARD__RUN.tar.xz``, written once and never rewritten (issue 90: one archive had 50 versions in
git, most of the repository's size); the record lists every archive of the card (archive, files, bytes,
sha256, raw_bytes). A card written before this rule has one record at the top level (``archive``, ...):
it is kept as the first entry of ``archives``. It takes a run's records, not its weights: metrics, logs,
config, commands, machines, ratings, and the JSON/JSONL that evaluation commands wrote into the run folder;
never ``checkpoints/`` or TensorBoard event files (the metrics hold the same numbers).

Usage: ``python research/card_archive.py docs/results/CARD runs/RUN [runs/RUN2 ...]``
(``--as NAME``: archive a single run under another name; ``--list``: print the card's archived files).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD_SUFFIXES = (".json", ".jsonl", ".yaml", ".txt", ".log", ".csv", ".md")
SKIPPED_FOLDERS = ("checkpoints", "tb")


def run_files(run: Path) -> list[Path]:
    """The record files of one run folder (relative paths, sorted): no weights, no TensorBoard events."""
    found = []
    for path in sorted(run.rglob("*")):
        rel = path.relative_to(run)
        if not path.is_file() or rel.parts[0] in SKIPPED_FOLDERS or path.suffix not in RECORD_SUFFIXES:
            continue
        found.append(rel)
    return found


def default_archive(card: Path, name: str, root: Path = ROOT) -> str:
    """``docs/results/a/b`` and run ``r`` -> ``results-data/a__b__r.tar.xz``."""
    rel = card.resolve().relative_to((root / "docs" / "results").resolve())
    return f"results-data/{'__'.join([*rel.parts, name])}.tar.xz"


def archives(record: dict) -> list[dict]:
    """Every archive entry of a card's ``raw.json``: the ``archives`` list, or the one top-level record of a card
    written before one archive per run."""
    if "archives" in record:
        return list(record["archives"])
    return [{k: record[k] for k in ("archive", "files", "bytes", "sha256", "raw_bytes") if k in record}] \
        if "archive" in record else []


def archive_bytes(files: dict[str, bytes]) -> bytes:
    """A deterministic archive: sorted names, no owners, no timestamps (the same files give the same bytes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    return buffer.getvalue()


def add_runs(card: Path, runs: list[Path], names: list[str] | None = None, root: Path = ROOT) -> dict:
    """Archive each run folder in a new file beside the card and add it to ``raw.json``; returns the record.
    An archive is never overwritten: a run already archived under that name fails, naming ``--as``."""
    names = names or [run.name for run in runs]
    if len(names) != len(runs):
        raise SystemExit("--as names one run only")
    record_path = card / "raw.json"
    entries = archives(json.loads(record_path.read_text())) if record_path.exists() else []
    for entry in entries:
        data = (root / entry["archive"]).read_bytes() if (root / entry["archive"]).exists() else b""
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise SystemExit(f"{entry['archive']} does not match {record_path}; not touching either")
    new = []
    for run, name in zip(runs, names):
        chosen = run_files(run)
        if not chosen:
            raise SystemExit(f"{run}: no run records found (metrics.jsonl, train.log, ...); is it a run folder?")
        archive = default_archive(card, name, root)
        if (root / archive).exists() or any(e["archive"] == archive for e in entries + new):
            raise SystemExit(f"{archive} exists: archives are written once; name this run with --as NEWNAME")
        files = {f"{name}/{rel.as_posix()}": (run / rel).read_bytes() for rel in chosen}
        data = archive_bytes(files)
        new.append({"archive": archive, "files": sorted(files), "bytes": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(), "raw_bytes": sum(len(v) for v in files.values()),
                    "_data": data})
    for entry in new:
        path = root / entry["archive"]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(entry.pop("_data"))
        tmp.replace(path)
    record = {"archives": entries + new}
    card.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("card", type=Path)
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--as", dest="name", help="folder name in the archive (one run only)")
    parser.add_argument("--list", action="store_true", help="print the archive's files and stop")
    args = parser.parse_args(argv)
    if args.list:
        record = json.loads((args.card / "raw.json").read_text())
        print("\n".join(f"{e['archive']}: {f}" for e in archives(record) for f in e["files"]))
        return 0
    if not args.runs:
        parser.error("name at least one run folder")
    record = add_runs(args.card, args.runs, [args.name] if args.name else None)
    for entry in record["archives"][-len(args.runs):]:
        print(f"{entry['archive']}: {len(entry['files'])} files, {entry['raw_bytes']:,} bytes raw, "
              f"{entry['bytes']:,} compressed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
