"""Learning benchmark: one preset, several seeds one after the other, and how well each run holds its target.

Usage::

    .venv/bin/python benchmarks/learning.py --preset cartpole --minutes 15 --seeds 0 1 2 --target 475 \
        --eval-games 100 --out docs/results/learning/cartpole [KEY=VALUE ...]
    .venv/bin/python benchmarks/learning.py --preset tictactoe --minutes 20 --seeds 0 1 2 --target 0.9 \
        --opponent perfect --eval-games 100 --exact-tictactoe --out runs/bench-ttt

Per seed: ``moozi train --preset P --minutes M --seed S`` (a subprocess, so each
run starts clean; KEY=VALUE overrides pass through), then from its metrics the
time and env steps to the first test at or above ``--target``, the share of
later tests at or above it, and a final evaluation of the last checkpoint with
a 95% interval (single-player: mean return +- 1.96 standard errors;
two-player: W/D/L against ``--opponent`` with Wilson intervals for the loss
and win rates), and the same for the ``best`` checkpoint where the run kept
one (testing.keep_best); with ``--exact-tictactoe`` also the exact loss
probability per seat against the perfect player. Overall: median, min and max
over the seeds.

The machine's load is recorded (1-minute load average before each run, and the
mean and max sampled during it) so a contended run is recognisable: with 2
cores, a mean load well above 2 means something else shared the machine.

Writes ``OUT/learning.json`` and ``OUT/learning.md`` (a table for
docs/results), and keeps every run under ``OUT/seed-S/``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from moozi.eval.stats import wilson_interval
from moozi.observe.machine import Sampler, machine_info, machine_line
from moozi.observe.metrics import read_metrics, training_rows

Z95 = 1.959963984540054


def summarize(run_dir: str, target: float) -> dict:
    """A run's test curve: the first test at or above ``target`` (wall seconds, env steps, updates), the share
    of later tests at or above it with their median / min / max, the last test, and the run's throughput."""
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


def mean_interval(values) -> dict:
    """Mean with a normal 95% interval (1.96 standard errors)."""
    v = np.asarray(values, np.float64)
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
    m = float(v.mean())
    return {"mean": m, "low": m - Z95 * se, "high": m + Z95 * se, "n": int(v.size)}


def final_eval(run_dir: Path, games: int, opponent: str, seed: int, checkpoint: str = "latest") -> dict:
    """A checkpoint (the last, or ``best``) played ``games`` games (test planner, greedy), with 95% intervals."""
    from moozi.eval.evaluate import play
    from moozi.workers import agent_return

    config, two_player, episodes, meta = play(run_dir, opponent, games, seed, checkpoint)
    returns = np.array([agent_return(e.trajectory, e.agent_seat, two_player) for e in episodes])
    out = {"checkpoint": checkpoint, "path": meta["path"], "games": int(returns.size),
           "updates": int(meta["counters"]["updates"]),
           "env_steps": int(meta["counters"]["env_steps"]), "return": mean_interval(returns)}
    if two_player:
        seats = np.array([e.agent_seat for e in episodes])
        n = int(returns.size)
        wins, losses = int(np.sum(returns > 0)), int(np.sum(returns < 0))
        out.update(opponent=opponent, wins=wins, draws=n - wins - losses, losses=losses,
                   loss_rate_95=wilson_interval(losses, n), win_rate_95=wilson_interval(wins, n),
                   losses_by_seat=[int(np.sum((returns < 0) & (seats == s))) for s in (0, 1)])
    return out


def run_seed(args, seed: int, out: Path) -> dict:
    run = out / f"seed-{seed}"
    cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", args.preset, "--run-dir", str(run),
           "--seed", str(seed), *(["--minutes", str(args.minutes)] if args.minutes else []), *args.overrides]
    before = os.getloadavg()[0]
    t = time.monotonic()
    with Sampler(lambda: os.getloadavg()[0], args.load_every_s, edges=False) as load, open(out / f"seed-{seed}.log", "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    wall = time.monotonic() - t
    if proc.returncode != 0:
        raise SystemExit(f"seed {seed}: `{' '.join(cmd)}` exited {proc.returncode}; see {out}/seed-{seed}.log")
    result = {"seed": seed, "command": "moozi " + " ".join(cmd[3:]), "command_wall_s": round(wall, 1),
              "load_before": round(before, 2),
              "load_during_mean": round(float(np.mean(load.samples)), 2) if load.samples else None,
              "load_during_max": round(float(np.max(load.samples)), 2) if load.samples else None,
              **summarize(str(run), args.target)}
    result["final_eval"] = final_eval(run, args.eval_games, args.opponent, seed=1000 + seed)
    best = run / "checkpoints" / "best"
    has_best = best.is_dir() and any(best.iterdir())
    result["best_eval"] = (final_eval(run, args.eval_games, args.opponent, seed=1000 + seed, checkpoint="best")
                           if has_best else None)
    if args.exact_tictactoe:
        from tictactoe_exact import exact_outcomes

        result["exact"] = {which: _exact_summary(exact_outcomes(run, which))
                           for which in (["latest", "best"] if has_best else ["latest"])}
    return result


def _exact_summary(r: dict) -> dict:
    """P(loss) per seat and the number of losing lines (tictactoe_exact.exact_outcomes)."""
    return {"updates": r["updates"], **{f"p_loss_{seat}": r[seat]["loss"] for seat in ("first", "second")},
            **{f"losing_lines_{seat}": len(r[seat]["lines"]) for seat in ("first", "second")}}


def overall(seeds: list[dict]) -> dict:
    """Median, min and max over seeds of each headline number (None where a seed never reached the target)."""
    def stats(values):
        v = [x for x in values if x is not None]
        if not v:
            return None
        return {"median": float(np.median(v)), "min": float(np.min(v)), "max": float(np.max(v)), "n": len(v)}

    first = [s["first_at_target"] for s in seeds]
    return {
        "seeds": len(seeds),
        "reached_target": sum(f is not None for f in first),
        "first_at_target_wall_s": stats([f and f["wall_s"] for f in first]),
        "first_at_target_env_steps": stats([f and f["env_steps"] for f in first]),
        "later_share_at_target": stats([s.get("later_tests", {}).get("share_at_target") for s in seeds]),
        "final_eval_return_mean": stats([s["final_eval"]["return"]["mean"] for s in seeds]),
        "final_eval_losses": stats([s["final_eval"].get("losses") for s in seeds]),
        "best_eval_return_mean": stats([(s.get("best_eval") or {}).get("return", {}).get("mean") for s in seeds]),
        "best_eval_losses": stats([(s.get("best_eval") or {}).get("losses") for s in seeds]),
        "exact_p_loss_latest": stats([max(s["exact"]["latest"]["p_loss_first"], s["exact"]["latest"]["p_loss_second"])
                                      for s in seeds if "exact" in s]),
    }


def _eval_cell(e: dict | None) -> str:
    if not e:
        return "-"
    if "losses" in e:
        lo, hi = e["loss_rate_95"]
        return f"{e['wins']} / {e['draws']} / {e['losses']} (loss rate [{lo:.3f}, {hi:.3f}])"
    r = e["return"]
    return f"{r['mean']:.3g} [{r['low']:.3g}, {r['high']:.3g}] (update {e['updates']:,})"


def markdown(report: dict) -> str:
    a = report["args"]
    lines = [f"`{a['preset']}`, target {a['target']}, {a['minutes']} min per seed, final evaluation over "
             f"{a['eval_games']} games" + (f" against {a['opponent']}" if report["two_player"] else ""), "",
             *([f"Machine: {machine_line(report['machine'])}", ""] if "machine" in report else []),
             "| seed | first test >= target (s, env steps) | later tests >= target | last checkpoint (95%) "
             "| best checkpoint (95%) | load before / during (mean, max) |", "| --- | --- | --- | --- | --- | --- |"]
    for s in report["per_seed"]:
        f = s["first_at_target"]
        first = "not reached" if f is None else f"{f['wall_s']:.0f} s, {f['env_steps']:,}"
        later = s.get("later_tests")
        held = "-" if not later else f"{later['share_at_target']:.0%} of {later['n']} (median {later['median']:.3g})"
        load = f"{s['load_before']} / {s['load_during_mean']}, {s['load_during_max']}"
        lines.append(f"| {s['seed']} | {first} | {held} | {_eval_cell(s['final_eval'])} "
                     f"| {_eval_cell(s.get('best_eval'))} | {load} |")
    if any("exact" in s for s in report["per_seed"]):
        lines += ["", "Exact P(loss) against the perfect player (benchmarks/tictactoe_exact.py), moving first / "
                  "second:", "", "| seed | last checkpoint | best checkpoint |", "| --- | --- | --- |"]
        for s in report["per_seed"]:
            cell = {w: f"{e['p_loss_first']:.4f} / {e['p_loss_second']:.4f}" for w, e in s["exact"].items()}
            lines.append(f"| {s['seed']} | {cell['latest']} | {cell.get('best', '-')} |")
    o = report["overall"]
    lines.append("")
    lines.append(f"Reached the target in {o['reached_target']} of {o['seeds']} seeds.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", required=True)
    p.add_argument("--minutes", type=float, default=None, help="per seed (leave out with schedule.max_env_steps)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--target", type=float, required=True, help="test/return_mean to reach")
    p.add_argument("--eval-games", type=int, default=100)
    p.add_argument("--opponent", default="random", help="two-player games: random or perfect")
    p.add_argument("--out", required=True)
    p.add_argument("--load-every-s", type=float, default=5.0)
    p.add_argument("--exact-tictactoe", action="store_true",
                   help="tic-tac-toe runs: also the exact P(loss) per seat against the perfect player")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [run_seed(args, s, out) for s in args.seeds]
    report = {"args": vars(args), "cores": os.cpu_count(), "machine": machine_info(),
              "two_player": "losses" in seeds[0]["final_eval"],
              "per_seed": seeds, "overall": overall(seeds)}
    (out / "learning.json").write_text(json.dumps(report, indent=1))
    (out / "learning.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
