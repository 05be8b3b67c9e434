"""Soak: a Ray run for hours with a random component SIGKILLed every few minutes, one SIGTERM and a resume.

One `moozi train --backend ray` run (CartPole, 2 training workers, 1 reanalyze worker, a tester; the
overrides of ``kill_test.py``, checkpoints every ``--checkpoint-min``) for ``--hours``:

* every ``--every-min`` minutes on average (uniform in [0.5, 1.5] of it) a victim drawn from the actors,
  the tester, the reanalyzer and the learner is SIGKILLed (pids from the run's ``workers.json``);
* once, near the middle, the run's process group gets SIGTERM: it must exit 143 within ``--stop-limit-s``
  with a final checkpoint, and is then continued with ``--resume`` for the rest of the time;
* every ``--sample-s`` seconds the resident memory of each component, the driver and Ray's daemons is read
  from /proc.

It reports (one JSON object, also written to ``--out``): kills that landed, restarts counted by the run,
per learner kill the updates and env steps the run went back to (the newest checkpoint at the kill) and what
it had reached (goal: nothing lost but the work since that checkpoint), the SIGTERM's stop time and what the
resume continued from (goal: nothing lost), memory per process name over time and its slope after warm-up
(least squares, MB per hour; a restarted component starts a new incarnation, so each name's slope is fitted
over its longest-lived incarnation), and that every checkpoint left loads.

    python benchmarks/soak.py --hours 2 --out soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kill_test import OVERRIDES, _checkpoints_ok, _kill, _pids, _wait  # noqa: E402

VICTIMS = ["actor", "actor_1", "tester", "reanalyzer_0", "learner"]


def _rows(run: Path) -> list[dict]:
    from moozi.observe.metrics import iter_metrics

    return [r for r in iter_metrics(run) if "updates" in r]


def _newest_step(run: Path) -> int | None:
    from moozi.checkpoint import list_checkpoints

    found = list_checkpoints(run / "checkpoints")
    return found[-1].step if found else None


def _memory(run: Path, driver: int, ray_dir: Path) -> dict[str, tuple[int, float]]:
    from moozi.observe.memory import pids_with, rss_mb

    out = {name: (pid, rss_mb(pid)) for name, pid in _pids(run).items()}
    out["driver"] = (driver, rss_mb(driver))
    out["ray_daemons"] = (0, sum(rss_mb(p) for p in pids_with(str(ray_dir))))
    return out


def slope_mb_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MB) points, in MB per hour (None for fewer than 3 points)."""
    import numpy as np

    if len(points) < 3:
        return None
    t, m = np.asarray(points, dtype=float).T
    return float(np.polyfit(t / 3600.0, m, 1)[0])


def memory_report(samples: list[dict], warmup_s: float) -> dict:
    """Per process name: MB at the first and last sample after warm-up and the slope over its longest-lived
    incarnation (one pid) after warm-up. ``samples``: ``{"t": s, "mem": {name: [pid, mb]}}``."""
    names = sorted({n for s in samples for n in s["mem"]})
    out = {}
    for name in names:
        after = [(s["t"], *s["mem"][name]) for s in samples if s["t"] >= warmup_s and name in s["mem"]]
        after = [(t, pid, mb) for t, pid, mb in after if mb > 0]
        if not after:
            continue
        by_pid: dict[int, list[tuple[float, float]]] = {}
        for t, pid, mb in after:
            by_pid.setdefault(pid, []).append((t, mb))
        longest = max(by_pid.values(), key=lambda pts: pts[-1][0] - pts[0][0])
        out[name] = {"mb_first": round(after[0][2], 1), "mb_last": round(after[-1][2], 1),
                     "mb_max": round(max(mb for _, _, mb in after), 1), "incarnations": len(by_pid),
                     "longest_incarnation_min": round((longest[-1][0] - longest[0][0]) / 60.0, 1),
                     "slope_mb_per_hour": None if (s := slope_mb_per_hour(longest)) is None else round(s, 2)}
    totals = [(s["t"], sum(mb for _, mb in s["mem"].values())) for s in samples if s["t"] >= warmup_s]
    out["total"] = {"mb_first": round(totals[0][1], 1) if totals else None,
                    "mb_last": round(totals[-1][1], 1) if totals else None,
                    "slope_mb_per_hour": None if (s := slope_mb_per_hour(totals)) is None else round(s, 2)}
    return out


def _summary(text: str) -> dict:
    for line in reversed(text.splitlines()):
        j = line[line.find("{"):] if "{" in line else ""
        if j.startswith('{"run_dir"'):
            return json.loads(j)
    return {}


def _int_after(text: str, marker: str) -> int | None:
    """The integer (commas allowed) right after ``marker`` in ``text``, or None."""
    i = text.find(marker)
    if i < 0:
        return None
    digits = "".join(c for c in text[i + len(marker):].split()[0] if c.isdigit()) if text[i + len(marker):] else ""
    return int(digits) if digits else None


def soak(args) -> dict:
    root = Path(tempfile.mkdtemp(prefix="soak-"))
    run = root / "run"
    overrides = [o for o in OVERRIDES if not o.startswith("output.checkpoint_every_minutes")]
    overrides.append(f"output.checkpoint_every_minutes={args.checkpoint_min}")
    total_s = 3600.0 * args.hours
    rng = random.Random(args.seed)
    stop_at = total_s * rng.uniform(0.45, 0.55)
    t0 = time.monotonic()
    samples: list[dict] = []
    kills: list[dict] = []
    segments: list[dict] = []

    def start(cmd: list[str], name: str):
        log = open(root / f"console-{name}.txt", "w")
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log

    def sample(proc):
        samples.append({"t": round(time.monotonic() - t0, 1),
                        "mem": {k: list(v) for k, v in _memory(run, proc.pid, run / "ray").items()}})

    def live(proc, until: float, next_sample: list[float]) -> bool:
        """Sample memory until monotonic time ``until``; False if the run exited meanwhile."""
        while time.monotonic() < until:
            if proc.poll() is not None:
                return False
            if time.monotonic() >= next_sample[0]:
                sample(proc)
                next_sample[0] = time.monotonic() + args.sample_s
            time.sleep(min(1.0, max(until - time.monotonic(), 0.0)))
        return True

    first = [sys.executable, "-m", "moozi.cli", "train", "--preset", "cartpole", "--backend", "ray",
             "--run-dir", str(run), "--minutes", str(args.hours * 60 + 30), "--seed", str(args.seed), *overrides]
    proc, log = start(first, "1")
    next_sample = [0.0]
    _wait(lambda: (run / "metrics.jsonl").exists(), 300, proc)
    next_kill = time.monotonic() + 60 * args.every_min * rng.uniform(0.5, 1.5)
    sigterm: dict = {}
    try:
        for phase in ("before_stop", "after_resume"):
            end = t0 + (stop_at if phase == "before_stop" else total_s - 180.0)  # the last kill's restart in time
            while time.monotonic() < end:
                if not live(proc, min(next_kill, end), next_sample):
                    break
                if time.monotonic() >= end:
                    break
                victim = rng.choice(VICTIMS)
                rows = _rows(run)
                entry = {"t_min": round((time.monotonic() - t0) / 60, 2), "victim": victim,
                         "checkpoint_step": _newest_step(run),
                         "updates_last_row": rows[-1]["updates"] if rows else None,
                         "env_steps_last_row": rows[-1].get("env_steps") if rows else None, "rows_before": len(rows)}
                entry["pid"] = _kill(run, victim, proc)
                if victim == "learner" and entry["pid"] is not None:
                    _wait(lambda: _pids(run).get("learner") not in (None, entry["pid"]), 180, proc)
                kills.append(entry)
                next_kill = time.monotonic() + 60 * args.every_min * rng.uniform(0.5, 1.5)
            if proc.poll() is not None and phase == "before_stop":
                break
            if phase == "before_stop":
                rows = _rows(run)
                sigterm = {"t_min": round((time.monotonic() - t0) / 60, 2),
                           "updates_last_row": rows[-1]["updates"] if rows else None}
                sent = time.monotonic()
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=args.stop_limit_s * 4)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                sigterm.update(stop_s=round(time.monotonic() - sent, 1), exit=proc.returncode,
                               checkpoint_step=_newest_step(run))
                log.close()
                text = (root / "console-1.txt").read_text()
                sigterm["traceback"] = "Traceback" in text
                sigterm["message"] = next((ln for ln in text.splitlines() if "SIGTERM" in ln), None)
                sigterm["processes_left"] = len(subprocess.run(["pgrep", "-f", str(run)], capture_output=True,
                                                               text=True).stdout.split())
                segments.append({"exit": proc.returncode, "summary": _summary(text)})
                left_min = max((total_s - (time.monotonic() - t0)) / 60.0, 1.0)
                proc, log = start([sys.executable, "-m", "moozi.cli", "train", "--resume", str(run),
                                   "--minutes", f"{left_min:.2f}"], "2")
                sigterm["updates_at_stop"] = segments[0]["summary"].get("updates")
                console2 = root / "console-2.txt"
                _wait(lambda: "resuming" in console2.read_text(), 300, proc)
                said = next((ln for ln in console2.read_text().splitlines() if "resuming" in ln), "")
                sigterm["resume_line"] = said.strip() or None
                sigterm["resumed_at_update"] = _int_after(said, "at update ")
        hang = live(proc, t0 + total_s + args.grace, next_sample)  # memory sampled to the end
        if hang:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
    text = (root / "console-2.txt").read_text() if (root / "console-2.txt").exists() else ""
    segments.append({"exit": proc.returncode, "summary": _summary(text)})
    rows = _rows(run)
    for k in kills:  # what the run went on from after each learner kill
        if k["victim"] == "learner" and k["pid"] is not None:
            later = rows[k["rows_before"]:k["rows_before"] + 3] if k["rows_before"] < len(rows) else []
            k["updates_first_row_after"] = later[0]["updates"] if later else None
            k["env_steps_first_row_after"] = later[0].get("env_steps") if later else None
            if k["checkpoint_step"] is not None and k["updates_last_row"] is not None:
                k["updates_lost_at_most"] = k["updates_last_row"] - k["checkpoint_step"]
    good, bad = _checkpoints_ok(run)
    landed = [k for k in kills if k["pid"] is not None]
    final = segments[-1]["summary"]
    result = {
        "hours": args.hours, "seed": args.seed, "every_min": args.every_min, "checkpoint_min": args.checkpoint_min,
        "kills_tried": len(kills), "kills_landed": len(landed),
        "kills_by_victim": {v: sum(1 for k in landed if k["victim"] == v) for v in VICTIMS},
        "restarts_segment_1": segments[0]["summary"].get("restarts") if len(segments) > 1 else None,
        "restarts_final": final.get("restarts"), "env_steps": final.get("env_steps"), "updates": final.get("updates"),
        "sigterm": sigterm, "kills": kills, "exits": [s["exit"] for s in segments], "hang": hang,
        "checkpoints_good": good, "checkpoints_bad": bad,
        "processes_left": len(subprocess.run(["pgrep", "-f", str(run)], capture_output=True, text=True).stdout.split()),
        "memory": memory_report(samples, 60.0 * args.warmup_min), "wall_min": round((time.monotonic() - t0) / 60, 1),
        "run_dir": str(run),
    }
    (root / "memory-samples.json").write_text(json.dumps(samples))
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hours", type=float, default=2.0)
    p.add_argument("--every-min", type=float, default=6.0, help="mean minutes between kills")
    p.add_argument("--checkpoint-min", type=float, default=2.0, help="output.checkpoint_every_minutes")
    p.add_argument("--sample-s", type=float, default=30.0)
    p.add_argument("--warmup-min", type=float, default=10.0, help="memory slopes are fitted after this")
    p.add_argument("--stop-limit-s", type=float, default=30.0, help="SIGTERM must stop the run within this")
    p.add_argument("--grace", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    r = soak(args)
    st = r["sigterm"]
    learner_ok = all(k.get("updates_first_row_after") is None or k["checkpoint_step"] is None
                     or k["updates_first_row_after"] >= k["checkpoint_step"]
                     for k in r["kills"] if k["victim"] == "learner" and k["pid"] is not None)
    r["ok"] = bool(not r["hang"] and r["exits"] == [143, 0] and r["checkpoints_bad"] == 0 and r["checkpoints_good"]
                   and not r["processes_left"] and st.get("stop_s", 1e9) <= args.stop_limit_s
                   and not st.get("traceback") and not st.get("processes_left")
                   and st.get("checkpoint_step") == st.get("updates_at_stop") == st.get("resumed_at_update")
                   and r["kills_landed"] == r["kills_tried"] == r["restarts_final"] and learner_ok)
    text = json.dumps(r)
    if args.out:
        args.out.write_text(text + "\n")
    print(text, flush=True)
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
