"""What runs after a checkpoint: gating (the newest against ``best``; an accepted one becomes ``best``), grading
(the newest's mistakes against perfect play on connect four; with ``grading.keep_best`` the fewest make ``best``)
and a tournament (the newest rated against anchors and earlier ones), each within its share of the run's wall
clock. A failed tournament, gate or grading never ends a training run."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from moozi.checkpoint import CheckpointError
from moozi.run_dir import BEST_DIR

log = logging.getLogger("moozi")


def _with_counters(row: dict, counters: dict) -> dict:
    """A hook's metrics row with the run's counters, so that it plots against env steps and wall clock."""
    return {**row, **{k: counters[k] for k in ("env_steps", "updates", "wall_s") if k in counters}}


def _gate_row(m: dict) -> tuple[dict, str, float]:
    """A gate's metrics, its log words and the number ``best`` records: a two-player gate's score after its pairs,
    or a single-player gate's paired difference of returns over its games (``gate/difference``)."""
    if "paired_difference" in m:
        d = m["paired_difference"]
        m["gate"]["measure"] = "paired difference"
        return ({"gate/difference": d["value"], "gate/difference_low": d["low"], "gate/games": float(m["games"])},
                f"after {m['games']} games each, paired difference {d['value']:+.2f} [{d['low']:+.2f}, "
                f"{d['high']:+.2f}]", d["value"])
    gate = m["gate"]
    row = {"gate/score": m["score"]["value"], "gate/pairs": float(gate["pairs_used"])}
    if "llr" in gate:
        row["gate/llr"] = gate["llr"]
    return row, f"after {gate['pairs_used']} pairs, score {m['score']['value']:.3f}", m["score"]["value"]


class CheckpointHooks:
    """The gate, the grading and the tournament of one run, given their collaborators.

    run: the :class:`~moozi.driver.record.RunRecord` (its plain data is what ``checkpoints/best`` records).
    metrics: the run's :class:`~moozi.observe.metrics.MetricsWriter` (one row per tournament or gate).
    save_best: ``(published, meta)`` -> keeps params as ``checkpoints/best`` (the learner's ``save_best``).
    """

    def __init__(self, run, metrics, save_best: Callable[[dict, dict], Any]):
        self.run_dir, self.config, self.config_dict = run.run_dir, run.config, run.data
        self.metrics, self.save_best = metrics, save_best
        self.tournament_s = 0.0  # seconds spent in tournaments (and gates) by this invocation
        self.gating_s = 0.0
        self.grading_s = 0.0
        self.best_mistakes: float | None = None  # grading.keep_best: the best's mistake rate (read on first use)

    def after_checkpoint(self, counters: dict) -> None:
        self.gate(counters)
        self.grade(counters)
        self.tournament(counters)

    def grade(self, counters: dict) -> None:
        """After every ``grading.every_checkpoints`` checkpoints: the newest graded against perfect play
        (``moozi.eval.grade.grade_checkpoint``), its rates to the metrics as ``grade/*``; with ``keep_best``, it
        becomes ``best`` when its mistake rate over all graded positions is at most the best's. Skipped while
        grading has taken more than ``max_share`` of the run."""
        g = self.config.grading
        if not g.every_checkpoints or counters["checkpoints"] % g.every_checkpoints:
            return
        if self.grading_s > g.max_share * max(counters["wall_s"], 1.0):
            log.info("grading skipped: it took %.0f s, over %.0f%% of the run", self.grading_s, 100 * g.max_share)
            return
        from moozi.checkpoint import list_checkpoints
        from moozi.eval.grade import grade_checkpoint

        steps = sorted(c.step for c in list_checkpoints(self.run_dir / "checkpoints"))
        if not steps:
            return
        t0 = time.monotonic()
        try:
            rates = grade_checkpoint(self.run_dir, steps[-1], g, seed=self.config.schedule.seed + steps[-1])
        except Exception as err:  # a failed grading never ends a training run
            log.warning("grading update %d failed: %s", steps[-1], err)
            return
        finally:
            self.grading_s += time.monotonic() - t0
        row = {f"grade/{name}": c["rate"] for name, c in rates["categories"].items()}
        row.update({"grade/seconds": time.monotonic() - t0, "grade/share": self.grading_s / max(counters["wall_s"], 1.0),
                    "grade/ms_per_move": rates["ms_per_move"]})
        self.metrics.write(_with_counters(row, counters), step=counters["env_steps"])
        everything = rates["categories"]["all"]
        log.info("grade at update %d: %.1f%% mistakes [%.1f, %.1f] on %d positions", steps[-1],
                 100 * everything["rate"], 100 * everything["low"], 100 * everything["high"], everything["positions"])
        if g.keep_best:
            if self.best_mistakes is None:
                self.best_mistakes = self._best_meta().get("gate", {}).get("mistake_rate", float("inf"))
            if everything["rate"] <= self.best_mistakes:
                self.best_mistakes = everything["rate"]
                self._keep_best(steps[-1], {"decision": "graded", "mistake_rate": everything["rate"],
                                            "positions": everything["positions"]})

    def _best_meta(self) -> dict:
        """``checkpoints/best``'s metadata ({} when there is none or it cannot be read)."""
        from moozi.checkpoint import load_checkpoint
        from moozi.run_dir import find_checkpoint

        try:
            return dict(load_checkpoint(find_checkpoint(self.run_dir, "best"), parts=[])[1])
        except (CheckpointError, OSError, KeyError, TypeError, ValueError):
            return {}

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
            self.metrics.write(_with_counters(result, counters), step=counters["env_steps"])
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
            self._keep_best(newest, {"decision": "first"})
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
        row, said, score = _gate_row(m)
        row.update({"gate/accepted": float(accepted), "gate/seconds": time.monotonic() - t0,
                    "gate/share": self.gating_s / max(counters["wall_s"], 1.0),
                    "gate/best_updates": float(newest if accepted else best_updates)})
        self.metrics.write(_with_counters(row, counters), step=counters["env_steps"])
        log.info("gate: update %d against best (update %d): %s %s", newest, best_updates, gate["decision"], said)
        if accepted:
            self._keep_best(newest, {**gate, "score": score, "against": best_updates, "records": m["records"]})

    def _keep_best(self, updates: int, gate: dict) -> None:
        """Copy checkpoint ``updates``'s published params to ``checkpoints/best`` with the gate's (or the
        grader's) result."""
        from moozi.run_dir import open_run

        try:
            opened = open_run(self.run_dir, str(updates), self.config)
            self.save_best({"params": opened.params, "version": int(opened.meta.get("version", 0))},
                          {"counters": opened.meta["counters"], "gate": gate, "config": self.config_dict})
        except (CheckpointError, OSError) as e:
            log.warning("the gated params (update %d) were not kept as best: %s", updates, e)
            return
        how = {"first": "first", "graded": f"graded, {100 * gate.get('mistake_rate', 0):.1f}% mistakes"}.get(
            gate["decision"]) or f"gated in, {gate.get('measure', 'score')} {gate['score']:.3f} against update {gate['against']}"
        log.info("best params: update %d (%s)", updates, how)
