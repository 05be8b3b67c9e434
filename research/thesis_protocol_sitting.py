"""One sitting of the thesis-protocol card's runs (docs/results/thesis-protocol): whatever comes next, for M minutes.

The card's eleven remaining 10M-frame runs take about 40 hours of a 2-core machine, a few hours a session. Each
session used to pick by hand the run to continue, its minutes, and the two final evaluations of a run that has
just reached its budget; this does the same from the run folders, in the card's order (one seed of every game
before the next seed):

- a run below its frame budget is trained on (``moozi train --preset GAME --protocol thesis --run-dir
  runs/tp-GAME-sSEED --continue ...`` with the card's overrides: it starts the run, or resumes it exactly);
- a run at its budget is evaluated over 64 games on the original package, with the preset's test planner and
  with the thesis's (``final-minatar.json``, ``final-thesis-planner.json``; written whole or not at all);
- a run the card's ``summary.json`` holds as done is skipped, its folder here or not;
- then the next run, until the minutes are spent. An evaluation is started only with ``--eval-minutes`` left, a
  sitting of training only with 10 minutes left (less is mostly compiling).

SIGTERM or SIGINT is passed to the command running (``moozi train`` then stops at its next checkpoint, within its
``--stop-grace``), and the sitting ends. ``--dry-run`` prints the next command and does nothing.

Usage: ``python research/thesis_protocol_sitting.py --minutes 150 [--runs runs] [--summary FILE] [--dry-run]``; one JSON line per
command run (what, the command, its exit code, minutes), on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from moozi.envs.protocol import named_protocol
from moozi.observe.metrics import iter_metrics

try:  # run as a script (python research/...) or imported as research.thesis_protocol_sitting
    from thesis_protocol_summary import OVERRIDES, ROOT  # type: ignore[import-not-found]
except ImportError:
    from research.thesis_protocol_summary import OVERRIDES, ROOT

QUEUE = [("breakout", 0), ("space_invaders", 0), ("freeway", 0), ("asterix", 0),
         ("breakout", 1), ("space_invaders", 1), ("freeway", 1), ("asterix", 1),
         ("breakout", 2), ("space_invaders", 2), ("freeway", 2), ("asterix", 2)]
"""The card's order: a seed of every game before the next seed."""
FINALS = {"final-minatar.json": ["--package", "minatar"],
          "final-thesis-planner.json": ["--package", "minatar", "--planner", "thesis"]}
MIN_TRAIN_MINUTES = 10


def frames_of(run: Path) -> int:
    """The most env frames ``run``'s metrics record (0 for a run not started)."""
    return max((int(r["env_steps"]) for r in iter_metrics(run) if "env_steps" in r), default=0)


def done_in(summary: Path) -> set[tuple[str, int]]:
    """The (game, seed) runs the card's summary holds as done with a final evaluation: done even where the run's
    folder is gone (folders do not outlive every session; a run lost before its end is started over)."""
    if not summary.exists():
        return set()
    data = json.loads(summary.read_text())
    return {(game, s["seed"]) for game, _ in QUEUE for s in data.get(game, {}).get("seeds", [])
            if s.get("status") == "done" and s.get("final_mean") is not None}


def budget(run: Path) -> int:
    """The frame budget of ``run`` (``tp-GAME-sSEED``): the thesis protocol's for its game."""
    return named_protocol("thesis", run.name[len("tp-"):].rsplit("-s", 1)[0]).max_env_frames


def next_step(runs: Path, done: set[tuple[str, int]] = frozenset()) -> tuple[str, Path, str] | None:
    """``("train", run, "")``, ``("eval", run, final_file)`` or None when every run of the queue is done; runs in
    ``done`` (:func:`done_in`) are skipped."""
    for game, seed in QUEUE:
        if (game, seed) in done:
            continue
        run = runs / f"tp-{game}-s{seed}"
        if frames_of(run) < budget(run):
            return ("train", run, "")
        for final in FINALS:
            if not (run / final).exists():
                return ("eval", run, final)
    return None


def command(step: tuple[str, Path, str], minutes: int, moozi: str = "moozi") -> list[str]:
    """The command line of ``step``; a sitting of training lasts ``minutes``."""
    kind, run, final = step
    if kind == "eval":
        return [moozi, "eval", str(run), "--games", "64", *FINALS[final]]
    game, seed = run.name[len("tp-"):].rsplit("-s", 1)
    protocol = OVERRIDES[0].split()  # "--protocol thesis"
    return [moozi, "train", "--preset", game, *protocol, "--run-dir", str(run), "--continue", "--minutes",
            str(minutes), "--stop-grace", "900", "--seed", seed, *OVERRIDES[1:]]


class _Forward:
    """Passes SIGTERM / SIGINT to the child, and remembers that the sitting should end."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self.stopped = False

    def __call__(self, signum, frame) -> None:
        self.stopped = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, required=True, help="the sitting's length, training and evaluations")
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--summary", type=Path, default=ROOT / "docs/results/thesis-protocol/summary.json")
    parser.add_argument("--eval-minutes", type=float, default=25.0,
                        help="start an evaluation only with this much left (Space Invaders' thesis-planner one: 18)")
    parser.add_argument("--moozi", default=str(Path(sys.executable).with_name("moozi")))
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.eval_minutes <= 0:
        parser.error("--minutes and --eval-minutes must be above 0")
    deadline = time.monotonic() + 60 * args.minutes
    forward = _Forward()
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    done = done_in(args.summary)
    while not forward.stopped and (step := next_step(args.runs, done)) is not None:
        left = (deadline - time.monotonic()) / 60
        if step[0] == "train" and left < MIN_TRAIN_MINUTES or step[0] == "eval" and left < args.eval_minutes:
            print(json.dumps({"next": step[0], "run": str(step[1]), "stopped": f"{left:.1f} minutes left"}))
            return 0
        cmd = command(step, int(left), args.moozi)
        if args.dry_run:
            print(json.dumps({"next": step[0], "run": str(step[1]), "command": " ".join(cmd)}))
            return 0
        start = time.monotonic()
        if step[0] == "eval":
            out = step[1] / step[2]
            partial = out.with_suffix(".json.partial")
            with open(partial, "w") as sink:
                forward.child = subprocess.Popen(cmd, stdout=sink)
                code = forward.child.wait()
            if code == 0 and partial.stat().st_size > 0:
                os.replace(partial, out)  # whole or not at all: the summary reads it as the final
        else:
            forward.child = subprocess.Popen(cmd)
            code = forward.child.wait()
        forward.child = None
        print(json.dumps({"did": step[0], "command": " ".join(cmd), "exit": code,
                          "minutes": round((time.monotonic() - start) / 60, 1)}), flush=True)
        if code != 0:
            return code
        if step[0] == "train" and frames_of(step[1]) < budget(step[1]):
            return 0  # its minutes are spent (or it was stopped): the sitting is over
    return 0


if __name__ == "__main__":
    sys.exit(main())
