"""Does reanalyze pay? Env steps (and minutes) to a test-return target with and without it, over seeds.

    python research/reanalyze_pays.py --preset cartpole --target 475 --seeds 0 1 2 \
        --fractions 0 0.5 --minutes 8 --max-env-steps 1000000

Runs ``moozi train`` once per (seed, fraction), one after the other, alternating
fractions within each seed; reports per run the env steps, updates and
minutes at the first test at or above the target (None if never), and per
fraction the median over seeds; the ratio of medians (fraction / first
fraction) is the answer. JSON lines on stdout (and ``--out``). ``--stop-at-target`` ends each run
at its first test at or above the target (its budget, and so a decay over it, unchanged).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from moozi.observe.machine import machine_info
from moozi.observe.metrics import read_metrics, training_rows


def first_reach(run: Path, target: float) -> dict:
    rows = read_metrics(run)
    tests = [r for r in rows if "test/return_mean" in r]
    hit = next((r for r in tests if r["test/return_mean"] >= target), None)
    trained = training_rows(rows)
    last = trained[-1] if trained else {}
    return {"env_steps_to_target": hit["env_steps"] if hit else None,
            "updates_to_target": hit["updates"] if hit else None,
            "minutes_to_target": round(hit["wall_s"] / 60, 2) if hit else None,
            "final_env_steps": last.get("env_steps"), "final_minutes": round(last.get("wall_s", 0) / 60, 2),
            "last_test": tests[-1]["test/return_mean"] if tests else None,
            "reanalyzed_positions": last.get("reanalyze/positions_total")}


def _train(cmd: list[str], run: Path, stop_at: float | None) -> tuple[int, str]:
    """Run ``moozi train``; with ``stop_at``, interrupt it once a test reaches that return."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True)
        while proc.poll() is None:
            time.sleep(2.0)
            if stop_at is not None and (run / "metrics.jsonl").exists() and first_reach(run, stop_at)[
                    "env_steps_to_target"] is not None:
                proc.send_signal(signal.SIGINT)
                proc.wait()
        err.seek(0)
        return proc.returncode, err.read()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="cartpole")
    p.add_argument("--target", type=float, default=475.0)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--fractions", type=float, nargs="+", default=[0.0, 0.5])
    p.add_argument("--minutes", type=float, default=8.0)
    p.add_argument("--max-env-steps", type=int, default=1_000_000)
    p.add_argument("--override", dest="overrides", action="append", default=[])
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--stop-at-target", action="store_true",
                   help="stop each run (Ctrl-C, a clean stop) at its first test at or above the target: the budget "
                        "(and so the learning-rate decay over it) is unchanged, only the rest is not played")
    args = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="moozi-reanalyze-"))
    results = []
    for seed in args.seeds:
        for f in args.fractions:
            run = base / f"seed{seed}-f{f}"
            cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", args.preset, "--run-dir", str(run),
                   "--seed", str(seed), "--minutes", str(args.minutes), f"reanalyze.fraction={f}",
                   f"schedule.max_env_steps={args.max_env_steps}", *args.overrides]
            t = time.time()
            rc, err = _train(cmd, run, args.target if args.stop_at_target else None)
            if rc != 0:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
            r = {"preset": args.preset, "seed": seed, "fraction": f, **first_reach(run, args.target),
                 "wall_s": round(time.time() - t, 1), "run_dir": str(run)}
            print(json.dumps(r), flush=True)
            results.append(r)
    summary = {"target": args.target, "medians": {}}
    for f in args.fractions:
        steps = [r["env_steps_to_target"] for r in results if r["fraction"] == f]
        reached = [s for s in steps if s is not None]
        # a run that never reached the target counts as its whole budget (an optimistic bound for it)
        filled = [s if s is not None else r["final_env_steps"] for s, r in
                  zip(steps, [r for r in results if r["fraction"] == f])]
        summary["medians"][str(f)] = {"reached": f"{len(reached)}/{len(steps)}",
                                      "median_env_steps_to_target": statistics.median(filled) if filled else None}
    first = summary["medians"][str(args.fractions[0])]["median_env_steps_to_target"]
    for f in args.fractions[1:]:
        m = summary["medians"][str(f)]["median_env_steps_to_target"]
        summary[f"ratio_{f}_over_{args.fractions[0]}"] = m / first if m and first else None
    print(json.dumps(summary), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as fh:
            for r in [{"mode": "machine", **machine_info()}] + results + [summary]:
                fh.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
