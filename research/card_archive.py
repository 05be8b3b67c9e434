"""Put runs' records into a result card's compressed archive and keep its ``raw.json`` true.

A card's raw runs live in one ``results-data/*.tar.xz`` archive, recorded in the card's ``raw.json``
(archive, files, bytes, sha256, raw_bytes); raw logs are never committed as plain text. This adds run
folders to that archive (creating it when the card has none), replacing a folder of the same name, and
rewrites the record. It takes a run's records, not its weights: metrics, logs, config, commands,
machines, ratings, and the JSON/JSONL that evaluation commands wrote into the run folder; never
``checkpoints/`` or TensorBoard event files (the metrics hold the same numbers).

Usage: ``python research/card_archive.py docs/results/CARD runs/RUN [runs/RUN2 ...]``
(``--as NAME``: store a single run under another folder name; ``--list``: print the archive's files).
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


def default_archive(card: Path, root: Path = ROOT) -> str:
    """``docs/results/a/b`` -> ``results-data/a__b.tar.xz`` (the naming the existing cards use)."""
    rel = card.resolve().relative_to((root / "docs" / "results").resolve())
    return f"results-data/{'__'.join(rel.parts)}.tar.xz"


def _read_archive(path: Path) -> dict[str, bytes]:
    if not path.exists():
        return {}
    with tarfile.open(path, "r:xz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _write_archive(path: Path, files: dict[str, bytes]) -> bytes:
    """A deterministic archive: sorted names, no owners, no timestamps (the same files give the same bytes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    data = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)  # the old archive stays whole until the new one is complete
    return data


def add_runs(card: Path, runs: list[Path], names: list[str] | None = None, root: Path = ROOT) -> dict:
    """Add (or replace) each run folder in the card's archive and rewrite ``raw.json``; returns the record."""
    names = names or [run.name for run in runs]
    if len(names) != len(runs):
        raise SystemExit("--as names one run only")
    record_path = card / "raw.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {"archive": default_archive(card, root)}
    archive = root / record["archive"]
    if record_path.exists() and archive.exists() and \
            hashlib.sha256(archive.read_bytes()).hexdigest() != record.get("sha256"):
        raise SystemExit(f"{archive} does not match {record_path}; not touching either")
    files = _read_archive(archive)
    for run, name in zip(runs, names):
        chosen = run_files(run)
        if not chosen:
            raise SystemExit(f"{run}: no run records found (metrics.jsonl, train.log, ...); is it a run folder?")
        files = {k: v for k, v in files.items() if not k.startswith(name + "/")}
        files.update({f"{name}/{rel.as_posix()}": (run / rel).read_bytes() for rel in chosen})
    data = _write_archive(archive, files)
    record.update(files=sorted(files), bytes=len(data), sha256=hashlib.sha256(data).hexdigest(),
                  raw_bytes=sum(len(v) for v in files.values()))
    ordered = {k: record[k] for k in ("archive", "files", "bytes", "sha256", "raw_bytes")}
    ordered.update({k: v for k, v in record.items() if k not in ordered})
    card.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(ordered, indent=1) + "\n")
    return ordered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("card", type=Path)
    parser.add_argument("runs", nargs="*", type=Path)
    parser.add_argument("--as", dest="name", help="folder name in the archive (one run only)")
    parser.add_argument("--list", action="store_true", help="print the archive's files and stop")
    args = parser.parse_args(argv)
    if args.list:
        record = json.loads((args.card / "raw.json").read_text())
        print("\n".join(record["files"]))
        return 0
    if not args.runs:
        parser.error("name at least one run folder")
    record = add_runs(args.card, args.runs, [args.name] if args.name else None)
    print(f"{record['archive']}: {len(record['files'])} files, {record['raw_bytes']:,} bytes raw, "
          f"{record['bytes']:,} compressed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
