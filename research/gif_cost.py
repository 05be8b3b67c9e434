"""What drawing test games as GIFs costs a training run: env steps/s with testing.record_every = 0, 10 and 1.

Usage::

    .venv/bin/python research/gif_cost.py --preset breakout --minutes 2 --rounds 2 --warmup 40

Runs ``moozi train --preset P --minutes M testing.record_every=R`` for each R
in turn (round-robin, so slow drift of the machine hits every setting alike),
``--rounds`` times, and measures env steps/s between the first metrics row
after ``--warmup`` seconds and the last row. Prints one JSON line per run and
a summary: the median env steps/s of each setting, its ratio to R = 0, the
tests and GIFs per run, and the mean seconds a drawing took (``test/draw_s``).
R = 1 (every test drawn) bounds the cost from above; R = 0 draws nothing and
keeps no frames.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from moozi.observe.metrics import read_metrics


def throughput(rows: list[dict], warmup: float) -> float:
    """Env steps/s from the first row at or after ``warmup`` seconds to the last row."""
    later = [r for r in rows if r.get("wall_s", 0.0) >= warmup]
    if len(later) < 2:
        raise SystemExit(f"fewer than two metrics rows after {warmup} s: give more --minutes")
    a, b = later[0], later[-1]
    return (b["env_steps"] - a["env_steps"]) / (b["wall_s"] - a["wall_s"])


def run_once(preset: str, minutes: float, every: int, warmup: float, seed: int, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", preset, "--run-dir", str(run), "--minutes",
               str(minutes), "--seed", str(seed), f"testing.record_every={every}", *extra]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
        rows = read_metrics(run)
        draws = [r["test/draw_s"] for r in rows if "test/draw_s" in r]
        return {"record_every": every, "env_steps_per_s": round(throughput(rows, warmup), 1),
                "tests": sum("test/return_mean" in r for r in rows), "gifs": len(list((run / "gifs").glob("*.gif"))),
                "draw_s_mean": round(statistics.mean(draws), 3) if draws else 0.0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="breakout")
    p.add_argument("--minutes", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=float, default=40.0)
    p.add_argument("--every", type=int, nargs="+", default=[0, 10, 1])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = p.parse_args(argv)
    results: dict[int, list[dict]] = {e: [] for e in args.every}
    for _ in range(args.rounds):
        for every in args.every:
            r = run_once(args.preset, args.minutes, every, args.warmup, args.seed, args.overrides)
            results[every].append(r)
            print(json.dumps(r), flush=True)
    base = statistics.median(r["env_steps_per_s"] for r in results[args.every[0]])
    summary = {"preset": args.preset, "minutes": args.minutes, "rounds": args.rounds, "settings": {}}
    for every, rs in results.items():
        med = statistics.median(r["env_steps_per_s"] for r in rs)
        summary["settings"][str(every)] = {
            "env_steps_per_s_median": round(med, 1), "ratio_to_first": round(med / base, 4),
            "per_round_ratio": [round(r["env_steps_per_s"] / b["env_steps_per_s"], 4)
                                for r, b in zip(rs, results[args.every[0]])],
            "tests": [r["tests"] for r in rs], "gifs": [r["gifs"] for r in rs],
            "draw_s_mean": [r["draw_s_mean"] for r in rs]}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
