"""What runs after a checkpoint: a tournament (the newest checkpoint rated against anchors and earlier ones) and
gating (the newest against ``best``; an accepted one becomes ``best``), each within its share of the run's wall
clock. A failed tournament or gate never ends a training run."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable

from moozi.checkpoint import CheckpointError
from moozi.run_dir import BEST_DIR

log = logging.getLogger("moozi")


class CheckpointHooks:
    """The tournament and the gate of one run, given their collaborators.

    run_dir, config, config_dict: the run (the dict is what ``checkpoints/best`` records).
    metrics: the run's :class:`~moozi.observe.metrics.MetricsWriter` (one row per tournament or gate).
    save_best: ``(published, meta)`` -> keeps params as ``checkpoints/best`` (the learner's ``save_best``).
    """

    def __init__(self, run_dir: Path, config, config_dict: dict, metrics, save_best: Callable[[dict, dict], Any]):
        self.run_dir, self.config, self.config_dict = Path(run_dir), config, config_dict
        self.metrics, self.save_best = metrics, save_best
        self.tournament_s = 0.0  # seconds spent in tournaments (and gates) by this invocation
        self.gating_s = 0.0

    def after_checkpoint(self, counters: dict) -> None:
        self.gate(counters)
        self.tournament(counters)

    def tournament(self, counters: dict) -> None:
        """After every ``tournament.every_checkpoints`` checkpoints: the newest against anchors and earlier ones
        (``moozi.eval.tournament``); skipped while tournaments have taken more than ``max_share`` of the run."""
        t = self.config.tournament
        if not t.every_checkpoints or counters["checkpoints"] % t.every_checkpoints:
            return
        if self.tournament_s > t.max_share * max(counters["wall_s"], 1.0):
            log.info("tournament skipped: tournaments took %.0f s, over %.0f%% of the run", self.tournament_s,
                     100 * t.max_share)
            return
        from moozi.checkpoint import list_checkpoints
        from moozi.eval.tournament import run_tournament

        steps = sorted(c.step for c in list_checkpoints(self.run_dir / "checkpoints"))
        if not steps:
            return
        earlier = steps[:-1][-t.previous:] if t.previous else []
        t0 = time.monotonic()
        try:
            result = run_tournament(self.run_dir, steps[-1], earlier, t, seed=self.config.schedule.seed + steps[-1])
        except Exception as err:  # a failed tournament never ends a training run
            log.warning("tournament at update %d failed: %s", steps[-1], err)
            result = {}
        self.tournament_s += time.monotonic() - t0
        if result:
            result["tournament/share"] = self.tournament_s / max(counters["wall_s"], 1.0)
            self.metrics.write(result, step=counters["env_steps"])
            log.info("tournament at update %d: rating %.0f [%.0f, %.0f]", steps[-1], result["rating/latest"],
                     result["rating/latest_low"], result["rating/latest_high"])

    def gate(self, counters: dict) -> None:
        """After every ``gating.every_checkpoints`` checkpoints: the newest against ``best`` until the gate
        decides (``moozi.eval.tournament.gate_checkpoint``); an accepted one becomes ``best``. The first
        checkpoint of a run starts ``best``. Skipped while gating has taken more than ``max_share`` of the run."""
        g = self.config.gating
        if not g.every_checkpoints or counters["checkpoints"] % g.every_checkpoints:
            return
        from moozi.checkpoint import list_checkpoints
        from moozi.eval.tournament import gate_checkpoint

        steps = sorted(c.step for c in list_checkpoints(self.run_dir / "checkpoints"))
        if not steps:
            return
        newest = steps[-1]
        kept = list_checkpoints(self.run_dir / "checkpoints" / BEST_DIR)
        if not kept:
            self._keep_gated(newest, {"decision": "first"})
            return
        best_updates = kept[-1].step
        if best_updates >= newest:
            return
        if self.gating_s > g.max_share * max(counters["wall_s"], 1.0):
            log.info("gating skipped: it took %.0f s, over %.0f%% of the run", self.gating_s, 100 * g.max_share)
            return
        t0 = time.monotonic()
        try:
            m = gate_checkpoint(self.run_dir, newest, best_updates, g, seed=self.config.schedule.seed + newest)
        except Exception as err:  # a failed gate never ends a training run; best stays
            log.warning("gating update %d against best (update %d) failed: %s", newest, best_updates, err)
            return
        finally:
            self.gating_s += time.monotonic() - t0
        gate = m["gate"]
        accepted = gate["decision"] == "accept"
        row = {"gate/accepted": float(accepted), "gate/score": m["score"]["value"],
               "gate/pairs": float(gate["pairs_used"]), "gate/seconds": time.monotonic() - t0,
               "gate/share": self.gating_s / max(counters["wall_s"], 1.0),
               "gate/best_updates": float(newest if accepted else best_updates)}
        if "llr" in gate:
            row["gate/llr"] = gate["llr"]
        self.metrics.write(row, step=counters["env_steps"])
        log.info("gate: update %d against best (update %d): %s after %d pairs, score %.3f", newest, best_updates,
                 gate["decision"], gate["pairs_used"], m["score"]["value"])
        if accepted:
            self._keep_gated(newest, {**gate, "score": m["score"]["value"], "against": best_updates,
                                      "records": m["records"]})

    def _keep_gated(self, updates: int, gate: dict) -> None:
        """Copy checkpoint ``updates``'s published params to ``checkpoints/best`` with the gate's result."""
        from moozi.run_dir import open_run

        try:
            opened = open_run(self.run_dir, str(updates), self.config)
            self.save_best({"params": opened.params, "version": int(opened.meta.get("version", 0))},
                          {"counters": opened.meta["counters"], "gate": gate, "config": self.config_dict})
        except (CheckpointError, OSError) as e:
            log.warning("the gated params (update %d) were not kept as best: %s", updates, e)
            return
        log.info("best params: update %d (%s)", updates, gate["decision"] if gate["decision"] == "first"
                 else f"gated in, score {gate['score']:.3f} against update {gate['against']}")
