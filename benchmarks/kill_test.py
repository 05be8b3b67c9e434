"""Kill test: SIGKILL workers (and the learner) of a Ray CartPole run and check that it goes on.

Scenarios (each a `moozi train --backend ray` subprocess with 2 training
workers and 1 reanalyze worker; pids come from the run's ``workers.json``):

* ``pair``: kill a training worker's process, then (once it is back) the
  reanalyze worker's; the run must reach its budget with ``restarts == 2``.
* ``random``: ``--kills`` kills in a row of a random worker (training, testing
  or reanalyze), each once the previous victim is back; the run must reach its
  budget with ``restarts == kills``, and every checkpoint left must load.
* ``learner``: kill the learner's process after its first checkpoint; the run
  must restore it and finish.

A hang is a run that does not exit within its budget plus ``--grace`` seconds.
Prints one JSON line per scenario; exit status 1 if any failed.

    python benchmarks/kill_test.py --scenario pair random learner --kills 20
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

OVERRIDES = ["distributed.train_workers=2", "distributed.reanalyze_workers=1", "reanalyze.fraction=0.5",
             "reanalyze.positions_per_call=256", "distributed.max_restarts=40", "distributed.restart_backoff_s=0.2",
             "output.checkpoint_every_minutes=0.2", "output.log_every_epochs=5"]


def _pids(run: Path) -> dict[str, int]:
    try:
        return {k: int(v["pid"]) for k, v in json.loads((run / "workers.json").read_text()).items()}
    except (OSError, ValueError, KeyError):
        return {}


def _wait(cond, timeout: float, proc) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False


def _kill(run: Path, name: str, proc) -> int | None:
    """SIGKILL ``name``'s process; wait until a new incarnation has a pid. Returns the killed pid."""
    for _ in range(50):  # workers.json is rewritten with metrics rows: a just-restarted pid may lag behind
        pid = _pids(run).get(name)
        if pid is None:
            return None
        try:
            os.kill(pid, signal.SIGKILL)
            break
        except ProcessLookupError:
            time.sleep(0.5)
    else:
        print(f"kill_test: no live process for {name} (stale pid {pid})", file=sys.stderr)
        return None
    if name != "learner":
        _wait(lambda: _pids(run).get(name) not in (None, pid), 120, proc)
    return pid


def _checkpoints_ok(run: Path) -> tuple[int, int]:
    from moozi.checkpoint import CheckpointError, list_checkpoints, load_checkpoint

    good = bad = 0
    for info in list_checkpoints(run / "checkpoints"):
        try:
            load_checkpoint(info.path)
            good += 1
        except CheckpointError:
            bad += 1
    return good, bad


def scenario(name: str, minutes: float, kills: int, grace: float, seed: int) -> dict:
    run = Path(tempfile.mkdtemp(prefix=f"kill-{name}-"))
    cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", "cartpole", "--backend", "ray",
           "--run-dir", str(run / "run"), "--minutes", str(minutes), *OVERRIDES]
    run = run / "run"
    log = open(run.parent / "console.txt", "w")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    rng = random.Random(seed)
    killed = []
    try:
        _wait(lambda: (run / "metrics.jsonl").exists(), 180, proc)
        t_training = time.monotonic() - t0
        if name == "pair":
            for victim in ("actor_1", "reanalyzer_0"):
                time.sleep(3)
                killed.append((victim, _kill(run, victim, proc)))
        elif name == "random":
            for _ in range(kills):
                time.sleep(rng.uniform(0.5, 3.0))
                victim = rng.choice(["actor", "actor_1", "reanalyzer_0", "tester"])
                killed.append((victim, _kill(run, victim, proc)))
        elif name == "learner":
            _wait(lambda: any((run / "checkpoints").glob("step_*")), 120, proc)
            time.sleep(2)
            killed.append(("learner", _kill(run, "learner", proc)))
        try:
            proc.wait(timeout=max(60 * minutes - (time.monotonic() - t0), 0) + grace)
            hang = False
        except subprocess.TimeoutExpired:
            hang = True
            proc.kill()
            proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    text = (run.parent / "console.txt").read_text()
    summary = {}
    for line in reversed(text.splitlines()):
        j = line[line.find("{"):] if "{" in line else ""
        if j.startswith('{"run_dir"'):
            summary = json.loads(j)
            break
    good, bad = _checkpoints_ok(run)
    left = subprocess.run(["pgrep", "-f", str(run)], capture_output=True, text=True).stdout.split()
    expected = len([k for k in killed if k[1] is not None])
    result = {
        "scenario": name, "kills": expected, "kills_tried": len(killed),
        "skipped": [victim for victim, pid in killed if pid is None], "exit": proc.returncode, "hang": hang,
        "restarts": summary.get("restarts"), "env_steps": summary.get("env_steps"),
        "updates": summary.get("updates"), "wall_s": round(time.monotonic() - t0, 1),
        "seconds_to_first_metrics_row": round(t_training, 1),
        "checkpoints_good": good, "checkpoints_bad": bad, "ray_processes_left": len(left),
        "run_dir": str(run),
    }
    result["ok"] = (not hang and proc.returncode == 0 and bad == 0 and good > 0 and not left
                    and expected == len(killed) and summary.get("restarts") == expected)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", nargs="+", default=["pair", "random", "learner"],
                   choices=["pair", "random", "learner"])
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--minutes", type=float, default=None,
                   help="budget per run (default: 1.5; random: 0.5 per kill, at least 4: each kill waits for the "
                        "victim's new incarnation, which imports JAX and compiles on the busy machine)")
    p.add_argument("--grace", type=float, default=90.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    ok = True
    for name in args.scenario:
        minutes = args.minutes or (max(4.0, args.kills * 0.5) if name == "random" else 1.5)
        r = scenario(name, minutes, args.kills, args.grace, args.seed)
        print(json.dumps(r), flush=True)
        ok &= r["ok"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
