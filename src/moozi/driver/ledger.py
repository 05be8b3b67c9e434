"""A run's counters and the arithmetic over them: what a finished segment and a reanalyze result add, the
positions the replay ratio is counted over, and how many positions reanalyze owes. Plain numbers, no calls."""

from __future__ import annotations

from typing import Any

from moozi.config.loading import reanalyze_planner
from moozi.workers import agent_return

COUNTERS = ("env_steps", "updates", "epochs", "episodes", "wall_s", "ready_env_steps", "checkpoints",
            "reanalyzed_positions", "restarts")


class Ledger:
    """The counters of one run (``counters``: the dict every row and checkpoint records) under ``config``."""

    def __init__(self, config):
        self.config = config
        self.counters: dict[str, Any] = {k: 0 for k in COUNTERS}
        self.counters["wall_s"] = 0.0

    def restore(self, saved: dict) -> None:
        """Continue from a checkpoint's counters (a key it lacks, written by an older moozi, starts at 0)."""
        self.counters.update({k: saved.get(k, 0) for k in COUNTERS})

    def count_segment(self, episodes, metrics: dict, row, version: int) -> None:
        """Count a finished acting segment (``metrics`` of the actor, episodes finished in it) into the counters
        and the metrics row being gathered (a :class:`~moozi.driver.rows.Gathered`); ``version`` is the params
        version published now (for the lag)."""
        steps = int(metrics.pop("acting/env_steps"))
        metrics.pop("acting/busy_s", None)
        self.counters["env_steps"] += steps
        self.counters["episodes"] += len(episodes)
        row.add_all(metrics)
        row.segment_lags.append(version - int(metrics.get("acting/version", version)))
        if episodes:
            row.extend("train/episode_return", (agent_return(e.trajectory, 0, False) for e in episodes))
            row.extend("train/episode_length", (e.length for e in episodes))

    def count_reanalyzed(self, stats: dict, metrics: dict, row) -> None:
        """Count positions the learner took back from reanalyze (``stats``), with the reanalyzer's ``metrics``."""
        self.counters["reanalyzed_positions"] += int(stats["reanalyze/positions"])
        row.add_all({k: v for k, v in {**metrics, **stats}.items() if k != "reanalyze/busy_s"})

    def fed(self) -> int:
        """Positions the replay ratio is counted over (:func:`fed_positions`)."""
        return fed_positions(self.counters, self.config)

    def reanalyze_due(self) -> int:
        """Positions reanalyze owes: ``fraction / (1 - fraction)`` of the env steps, less those done (none
        before the first update)."""
        f = self.config.reanalyze.fraction
        if f <= 0 or self.counters["updates"] == 0:
            return 0
        return int(f / (1.0 - f) * self.counters["env_steps"]) - self.counters["reanalyzed_positions"]

    def why_no_update(self, out_of_time: bool) -> str:
        """Why training has not started yet, in one line, with what to change (``out_of_time``: the time limit
        has passed)."""
        s, c = self.config.schedule, self.counters
        if out_of_time and c["env_steps"] == 0:  # compiling (on a busy machine) can outlast a short budget
            return ("the time limit ended before the first env step was counted (compiling the first epoch took "
                    "all of it): give more --minutes")
        if c["episodes"] == 0:
            return (f"no episode has ended in {c['env_steps']} env steps: only finished episodes go to replay; "
                    "cap episode length (env.kwargs.max_episode_steps, or the game's spec.max_episode_steps)"
                    + ("; or give more --minutes" if out_of_time else ""))
        played = f"{c['episodes']} episodes ({c['env_steps']} env steps) played"
        if out_of_time:
            return (f"the time limit ended before the first update ({played}; training starts once replay holds "
                    f"schedule.min_replay_steps = {s.min_replay_steps} steps): give more --minutes")
        return f"{played}; training starts once replay holds schedule.min_replay_steps = {s.min_replay_steps} steps"


def fed_positions(counters: dict, config) -> int:
    """Positions the replay ratio is counted over: env steps since replay was ready, plus the reanalyzed
    positions when they count (MuZero Reanalyse: the learner's fresh targets come from both)."""
    acted = counters["env_steps"] - counters["ready_env_steps"]
    if config.reanalyze.fraction > 0 and config.reanalyze.count_in_ratio:
        return acted + counters["reanalyzed_positions"]
    return acted


def simulations(counters: dict, config) -> int:
    """Search simulations the run has spent on training data: every acted env step searched with the training
    planner, every reanalyzed position with the reanalyze planner (tests and evaluation not counted)."""
    return int(counters["env_steps"]) * int(config.planner.num_simulations) + \
        int(counters["reanalyzed_positions"]) * int(reanalyze_planner(config).num_simulations)


def run_rates(counters: dict, config, device_busy: float | None = None) -> dict:
    """A run's summary figures from its counters: ``simulations_per_s`` (:func:`simulations` over the trained
    wall time), ``replay_ratio`` (samples drawn per position fed: updates x batch / :func:`fed_positions`, 0
    before the first update) and ``device_busy_fraction`` (as given: sampled on a GPU, None elsewhere)."""
    wall, fed = float(counters["wall_s"]), fed_positions(counters, config)
    return {"simulations_per_s": simulations(counters, config) / wall if wall > 0 else 0.0,
            "replay_ratio": counters["updates"] * config.schedule.batch_size / fed if fed > 0 else 0.0,
            "device_busy_fraction": device_busy}
