"""One sitting of the thesis-protocol card's runs (docs/results/thesis-protocol): whatever comes next, for M minutes.

The card's eleven remaining 10M-frame runs take about 40 hours of a 2-core machine, a few hours a session. Each
session used to pick by hand the run to continue, its minutes, and the two final evaluations of a run that has
just reached its budget; this does the same from the run folders, what is nearest its end first, then the card's
order (one seed of every game before the next seed):

- a run below its frame budget is trained on (``moozi train --preset GAME --protocol thesis --run-dir
  runs/tp-GAME-sSEED --continue ...`` with the card's overrides: it starts the run, or resumes it exactly);
- a run at its budget is evaluated over 64 games on the original package, with the preset's test planner and
  with the thesis's (``final-minatar.json``, ``final-thesis-planner.json``; written whole or not at all);
- a run the card's ``summary.json`` holds as done is skipped, its folder here or not; one it holds as running that
  its folder here no longer holds (gone, or started over: another identity in ``run.json``, or fewer frames) is
  said to be lost (a JSON line ``{"lost": ...}`` first), to be recorded;
- then the next run, until the minutes are spent. An evaluation is started only with ``--eval-minutes`` left, a
  sitting of training only with 10 minutes left (less is mostly compiling).

SIGTERM or SIGINT is passed to the command running (``moozi train`` then stops at its next checkpoint, within its
``--stop-grace``), and the sitting ends. ``--dry-run`` prints the next command and does nothing.

``--jobs 2`` runs two of these at once, each on a different run (the second is the next that is not the first). A
training's output goes to its run's log beside its folder (``runs/tp-GAME-sSEED.log``); the sitting's own lines to
stdout. On 2 cores one run leaves a quarter of them idle, and two at once made 1.12x the frames of one alone (the
card's measurement), while a lost ``runs/`` folder then takes two runs' progress.

Usage: ``python research/thesis_protocol_sitting.py --minutes 150 [--jobs 2] [--runs runs] [--summary FILE]
[--dry-run]``; one JSON line per command run (what, the command, its exit code, minutes), on stdout.
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
    from thesis_protocol_summary import OVERRIDES, ROOT, run_id_of, started_over  # type: ignore[import-not-found]
except ImportError:
    from research.thesis_protocol_summary import OVERRIDES, ROOT, run_id_of, started_over

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


def lost_in(summary: Path, runs: Path) -> list[dict]:
    """The runs the card's summary holds as running that their folder here no longer holds (gone, or a restart: another
    identity in its ``run.json``, or fewer frames): lost with their folders. Each is said at the sitting's start, so
    that the card records the loss; a sitting that trains such a run starts it over (never spliced), and
    ``thesis_protocol_summary.py`` then marks the summary's entry lost."""
    if not summary.exists():
        return []
    data = json.loads(summary.read_text())
    out = []
    for game, seed in QUEUE:
        for entry in data.get(game, {}).get("seeds", []):
            if entry["seed"] != seed or entry.get("status") != "running":
                continue
            run = runs / f"tp-{game}-s{seed}"
            here = frames_of(run)
            if started_over(entry, run_id_of(run), here):
                out.append({"lost": str(run), "frames_in_summary": entry["env_frames"], "frames_here": here})
    return out


def budget(run: Path) -> int:
    """The frame budget of ``run`` (``tp-GAME-sSEED``): the thesis protocol's for its game."""
    return named_protocol("thesis", run.name[len("tp-"):].rsplit("-s", 1)[0]).max_env_frames


def next_step(runs: Path, done: set[tuple[str, int]] = frozenset(),
              busy: set[Path] = frozenset()) -> tuple[str, Path, str] | None:
    """``("train", run, "")``, ``("eval", run, final_file)`` or None when every run of the queue is done; runs in
    ``done`` (:func:`done_in`) are skipped, and so are runs in ``busy`` (being trained or evaluated now).

    What is nearest its end comes first, since a run's folder may not outlive a session (a lost run is started
    over): a run at its budget is evaluated, then a started run is trained, the fewest frames left first; only
    then is the next run of the card's order started."""
    todo = [run for game, seed in QUEUE if (game, seed) not in done
            and (run := runs / f"tp-{game}-s{seed}") not in busy]
    frames = {run: frames_of(run) for run in todo}
    for run in todo:
        if frames[run] >= budget(run):
            for final in FINALS:
                if not (run / final).exists():
                    return ("eval", run, final)
    started = [run for run in todo if 0 < frames[run] < budget(run)]
    if started:
        return ("train", min(started, key=lambda run: budget(run) - frames[run]), "")
    fresh = [run for run in todo if frames[run] == 0]
    return ("train", fresh[0], "") if fresh else None


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
    """Passes SIGTERM / SIGINT to the children, and remembers that the sitting should end."""

    def __init__(self) -> None:
        self.children: list[subprocess.Popen] = []
        self.stopped = False

    def __call__(self, signum, frame) -> None:
        self.stopped = True
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signum)


class _Job:
    """One command of the sitting, running: its step, process, start time and (for an evaluation) its output."""

    def __init__(self, step: tuple[str, Path, str], cmd: list[str]):
        self.step, self.cmd, self.start = step, cmd, time.monotonic()
        if step[0] == "eval":
            self.out = step[1] / step[2]
            self.partial = self.out.with_suffix(".json.partial")
            self.sink = open(self.partial, "w")
            self.process = subprocess.Popen(cmd, stdout=self.sink)
        else:  # its lines in the run's own log beside its folder (runs/tp-GAME-sSEED.log), not mixed with another's
            self.sink = None
            with open(step[1].with_suffix(".log"), "a") as log:
                self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def finish(self) -> int:
        """Its exit code, once it has ended; an evaluation that worked becomes its final file (whole or not at
        all: the summary reads it as the final)."""
        code = self.process.returncode
        if self.sink is not None:
            self.sink.close()
            if code == 0 and self.partial.stat().st_size > 0:
                os.replace(self.partial, self.out)
        print(json.dumps({"did": self.step[0], "command": " ".join(self.cmd), "exit": code,
                          "minutes": round((time.monotonic() - self.start) / 60, 1)}), flush=True)
        return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, required=True, help="the sitting's length, training and evaluations")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs trained or evaluated at once, each a different run (2 on 2 cores: see the card)")
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--summary", type=Path, default=ROOT / "docs/results/thesis-protocol/summary.json")
    parser.add_argument("--eval-minutes", type=float, default=25.0,
                        help="start an evaluation only with this much left (Space Invaders' thesis-planner one: 18)")
    parser.add_argument("--moozi", default=str(Path(sys.executable).with_name("moozi")))
    parser.add_argument("--poll-s", type=float, default=5.0, help=argparse.SUPPRESS)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.eval_minutes <= 0:
        parser.error("--minutes and --eval-minutes must be above 0")
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, not {args.jobs}")
    deadline = time.monotonic() + 60 * args.minutes
    forward = _Forward()
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    done = done_in(args.summary)
    for lost in lost_in(args.summary, args.runs):
        print(json.dumps(lost), flush=True)
    running: dict[Path, _Job] = {}
    planned: set[Path] = set()  # --dry-run: the runs already printed
    starting, code = True, 0  # no more starts once a sitting's minutes are spent, a command fails or a signal came
    while True:
        while starting and not forward.stopped and len(running) + len(planned) < args.jobs:
            step = next_step(args.runs, done, busy=set(running) | planned)
            if step is None:
                break
            left = (deadline - time.monotonic()) / 60
            if step[0] == "train" and left < MIN_TRAIN_MINUTES or step[0] == "eval" and left < args.eval_minutes:
                print(json.dumps({"next": step[0], "run": str(step[1]), "stopped": f"{left:.1f} minutes left"}),
                      flush=True)
                starting = False
                break
            cmd = command(step, int(left), args.moozi)
            if args.dry_run:
                print(json.dumps({"next": step[0], "run": str(step[1]), "command": " ".join(cmd)}))
                planned.add(step[1])
                continue
            running[step[1]] = _Job(step, cmd)
            forward.children.append(running[step[1]].process)
        if args.dry_run or not running:
            return code
        time.sleep(args.poll_s)
        for run, job in list(running.items()):
            if job.process.poll() is None:
                continue
            del running[run]
            forward.children.remove(job.process)
            exit_code = job.finish()
            if exit_code != 0:
                code, starting = code or exit_code, False
            elif job.step[0] == "train" and frames_of(run) < budget(run):
                starting = False  # its minutes are spent (or it was stopped): the sitting ends with its other runs


if __name__ == "__main__":
    sys.exit(main())
