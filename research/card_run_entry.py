"""Write one long run's entry into a result card's ``summary.json``, from the run folder itself.

A run that spans several sittings (``moozi train --continue`` toward ``schedule.max_env_steps``) is
recorded in its card's ``summary.json`` under ``runs``: where it stands (env steps, updates, minutes,
share of the card's ``budget_env_steps``), every sitting's command (``commands.txt``), and every test
as ``[env_steps, updates, minutes, mean, min, max]``. This rewrites that entry from the run's
``metrics.jsonl`` and ``commands.txt`` after each sitting, keeping the fields written by hand before
(``overrides_why``, ``reading``, ...) unless given again, so the card's numbers come from the run and
not from a copy.

Usage: ``python research/card_run_entry.py docs/results/CARD runs/RUN --status "sitting 3 done"
[--set key=value ...] [--eval NAME=runs/RUN/eval.json ...] [--as NAME]`` (``--eval`` stores the JSON
line that ``moozi eval`` printed, saved to a file, under ``NAME``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from moozi.observe.metrics import read_metrics

TESTS_KEY = "tests_env_steps_updates_minutes_mean_min_max"


def run_entry(run: Path, budget_env_steps: int | None = None) -> dict:
    """Where a run stands, from its records: env steps, updates, minutes, sittings and tests."""
    rows = read_metrics(run)
    counted = [r for r in rows if "updates" in r and "env_steps" in r]
    if not counted:
        raise SystemExit(f"{run}: no training records in metrics.jsonl; is it a run folder that has trained?")
    last = counted[-1]
    updates_at = {r["step"]: r["updates"] for r in rows if "updates" in r}  # test rows may not carry updates
    tests = [[r["step"], r.get("updates", updates_at.get(r["step"])), round(r["wall_s"] / 60, 1),
              round(r["test/return_mean"], 2), r.get("test/return_min"), r.get("test/return_max")]
             for r in rows if "test/return_mean" in r]
    commands = run / "commands.txt"
    entry = {"run": run.name, "env_steps": last["env_steps"], "updates": last["updates"],
             "minutes": round(last["wall_s"] / 60, 1)}
    if budget_env_steps:
        entry["share_of_budget"] = round(last["env_steps"] / budget_env_steps, 3)
    entry["sittings"] = [line for line in commands.read_text().splitlines() if line.strip()] \
        if commands.exists() else []
    entry[TESTS_KEY] = tests
    return entry


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag} takes key=value, got {item!r}")
        out[key] = value
    return out


def write_entry(card: Path, run: Path, status: str, extra: dict | None = None, evals: dict | None = None,
                name: str | None = None) -> dict:
    """Add or replace ``run``'s entry in ``card/summary.json`` (other runs and hand-written fields kept)."""
    path = card / "summary.json"
    if not path.exists():
        raise SystemExit(f"{path} does not exist; a card's summary.json starts by hand (card, commit, machine, "
                         "budget_env_steps, runs: [])")
    summary = json.loads(path.read_text())
    name = name or run.name
    old = next((r for r in summary.get("runs", []) if r.get("run") == name), {})
    entry = dict(old)
    entry.update(run_entry(run, summary.get("budget_env_steps")), run=name, status=status, **(extra or {}))
    for key, eval_path in (evals or {}).items():
        entry[key] = json.loads(Path(eval_path).read_text())
    summary["runs"] = [r for r in summary.get("runs", []) if r.get("run") != name] + [entry]
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(path)  # the old summary stays whole until the new one is written
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("card", type=Path)
    parser.add_argument("run", type=Path)
    parser.add_argument("--status", required=True, help="where the run stands, in words")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="another field of the entry (a string), e.g. code=892d933")
    parser.add_argument("--eval", dest="evals", action="append", default=[], metavar="NAME=JSON",
                        help="store an evaluation's JSON (the line moozi eval prints, saved to a file) under NAME")
    parser.add_argument("--as", dest="name", help="the entry's run name (default: the folder's name)")
    args = parser.parse_args(argv)
    entry = write_entry(args.card, args.run, args.status, _pairs(args.sets, "--set"), _pairs(args.evals, "--eval"),
                        args.name)
    tests = entry[TESTS_KEY]
    print(f"{entry['run']}: {entry['env_steps']:,} env steps, {entry['updates']:,} updates, {entry['minutes']} min, "
          f"{len(entry['sittings'])} sittings, {len(tests)} tests; last tests: "
          + ", ".join(str(t[3]) for t in tests[-3:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
