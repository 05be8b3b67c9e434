"""Summarise a run's test curve: first test at or above a target, and how the later tests hold.

Usage: ``.venv/bin/python benchmarks/summarize_run.py RUN_DIR --target 475 [--json]``

Prints the first ``test/return_mean`` >= target (wall seconds, env steps,
updates), the share of later tests at or above it, their median / min / max,
the last test, and the run's throughput (env steps/s and updates/s overall).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from moozi.observe.metrics import read_metrics, training_rows


def summarize(run_dir: str, target: float) -> dict:
    rows = read_metrics(run_dir)
    tests = [r for r in rows if "test/return_mean" in r]
    out: dict = {"run_dir": run_dir, "target": target, "tests": len(tests)}
    if training_rows(rows):
        last = training_rows(rows)[-1]
        out.update(env_steps=last["env_steps"], updates=last["updates"], wall_s=round(last["wall_s"], 1),
                   env_steps_per_s=round(last["env_steps"] / max(last["wall_s"], 1e-9), 1),
                   updates_per_s=round(last["updates"] / max(last["wall_s"], 1e-9), 2))
    hit = next((i for i, r in enumerate(tests) if r["test/return_mean"] >= target), None)
    if hit is None:
        out["first_at_target"] = None
    else:
        r = tests[hit]
        out["first_at_target"] = {"wall_s": round(r["wall_s"], 1), "env_steps": r["env_steps"],
                                  "updates": r["updates"], "return": r["test/return_mean"]}
        later = np.array([t["test/return_mean"] for t in tests[hit + 1:]])
        if later.size:
            out["later_tests"] = {"n": int(later.size), "share_at_target": round(float(np.mean(later >= target)), 3),
                                  "median": float(np.median(later)), "min": float(later.min()),
                                  "max": float(later.max())}
    if tests:
        out["last_test"] = {"wall_s": round(tests[-1]["wall_s"], 1), "return": tests[-1]["test/return_mean"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--target", type=float, required=True)
    args = ap.parse_args()
    print(json.dumps(summarize(args.run_dir, args.target)))


if __name__ == "__main__":
    main()
