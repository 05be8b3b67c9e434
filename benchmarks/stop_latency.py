"""How long a SIGTERM to a run's process group takes to stop it, per preset (issue 92: within 30 s).

For each preset: `moozi train --preset P` in a session of its own; once its first metrics rows are written
(training has started: compiles done) and ``--after-s`` more seconds have passed, SIGTERM to the whole
process group (``--at-start``: as the first epoch begins, compiling); the time to exit, the exit code,
whether the final checkpoint was written and whether any process of the group is left. The stop flag is
honoured between the phases of an epoch (act, learn, reanalyze, test), so the worst case is a signal that
lands as the longest phase begins: the longest phase seen in the run's metrics (``time/*_s``) plus the
final checkpoint's write time bounds it, and is reported beside the measured stop; past the run's
``--stop-grace`` (25 s) the run ends anyway, without waiting for the phase (``grace_exit``).

    python benchmarks/stop_latency.py --presets cartpole breakout connect4 --out stop.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _rows(run: Path) -> list[dict]:
    from moozi.observe.metrics import iter_metrics

    return list(iter_metrics(run)) if (run / "metrics.jsonl").exists() else []


def _started(run: Path) -> bool:
    """The run's first epoch has begun (train.log's "training ..." line: start-up is over, compiling next)."""
    log = run / "train.log"
    return log.exists() and "moozi: training " in log.read_text()


def measure(preset: str, after_s: float, rows_before: int, timeout_s: float, overrides: list[str],
            at_start: bool = False) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"stop-{preset}-"))
    run = root / "run"
    cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", preset, "--run-dir", str(run),
           "--minutes", "60", *overrides]
    t0 = time.monotonic()
    with open(root / "console.txt", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while not _started(run) if at_start else len([r for r in _rows(run) if "updates" in r]) < rows_before:
                if proc.poll() is not None or time.monotonic() - t0 > timeout_s:
                    raise RuntimeError(f"{preset}: {'no first epoch' if at_start else f'no {rows_before} metrics rows'}"
                                       f" in {timeout_s:.0f} s")
                time.sleep(0.2 if at_start else 0.5)
            time.sleep(after_s)
            sent = time.monotonic()
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=timeout_s)
            stop_s = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    text = (root / "console.txt").read_text()
    rows = _rows(run)
    phases = {k: max(r[k] for r in rows if k in r) for k in
              ("time/act_s", "time/learn_s", "time/reanalyze_s", "time/test_s") if any(k in r for r in rows)}
    write_s = max((r["checkpoint/write_s"] for r in rows if "checkpoint/write_s" in r), default=0.0)
    left = 0
    for _ in range(20):  # the group's other processes end once their parent has
        try:
            os.killpg(proc.pid, 0)
            left = 1
            time.sleep(0.5)
        except ProcessLookupError:
            left = 0
            break
    from moozi.checkpoint import list_checkpoints

    return {"preset": preset, "exit": proc.returncode, "stop_s": round(stop_s, 2),
            "message": next((ln for ln in text.splitlines() if "stopped by SIGTERM" in ln or "--stop-grace" in ln), None),
            "grace_exit": "(--stop-grace): exiting now" in text, "signal_at": "first epoch" if at_start else "rows",
            "traceback": "Traceback" in text, "checkpoints": len(list_checkpoints(run / "checkpoints")),
            "longest_phase": max(phases, key=phases.get) if phases else None,
            "longest_phase_s": round(max(phases.values()), 2) if phases else None,
            "checkpoint_write_s": round(write_s, 2),
            "worst_case_bound_s": round(max(phases.values(), default=0.0) + write_s + stop_s, 2),
            "processes_left": left, "rows": len(rows), "run_dir": str(run)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", required=True)
    p.add_argument("--after-s", type=float, default=2.0, help="seconds after the first rows before the signal")
    p.add_argument("--rows", type=int, default=2, help="metrics rows to wait for (training started)")
    p.add_argument("--at-start", action="store_true",
                   help="signal as the first epoch begins (its compiling), not after --rows rows: the stop then "
                        "ends at the run's --stop-grace (default 25 s) with no checkpoint yet")
    p.add_argument("--timeout-s", type=float, default=900.0)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("overrides", nargs="*", help="overrides for every preset (key=value)")
    args = p.parse_args()
    ok = True
    for preset in args.presets:
        try:
            r = measure(preset, args.after_s, args.rows, args.timeout_s, args.overrides, args.at_start)
        except RuntimeError as e:
            r = {"preset": preset, "error": str(e)}
        r["ok"] = r.get("exit") == 143 and not r.get("traceback") and not r.get("processes_left") \
            and (r.get("checkpoints", 0) > 0 or r.get("grace_exit")) and r.get("stop_s", 1e9) <= 30.0
        ok &= r["ok"]
        line = json.dumps(r)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
