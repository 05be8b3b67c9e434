"""``schedule.kind: sync`` (the thesis), one epoch at a time (docs/architecture.md §1): the W training workers
each play a segment; the learner runs the updates the replay ratio owes; reanalyze workers re-search stored
episodes until reanalyzed positions reach f / (1 - f) of the acted steps; every ``sync_every`` epochs the
learner publishes; every ``testing.every`` epochs the tester plays."""

from __future__ import annotations

import math
import time

from moozi.driver.context import Lost
from moozi.driver.rows import Gathered


class SyncSchedule:
    """Epochs over a :class:`~moozi.driver.context.RunContext`."""

    def __init__(self, ctx):
        self.ctx = ctx

    def epoch(self, row: Gathered) -> None:
        """One epoch; its metrics gathered into ``row``, with each phase's time."""
        ctx, s = self.ctx, self.ctx.config.schedule
        t0 = time.perf_counter()
        stored = self._act(row)
        t1 = time.perf_counter()
        if ctx.ready() and not ctx.budget.winding_up():  # out of time or stopping: the due updates run on --resume
            self._learn(row)
        for fut, generation in stored:  # the learner takes calls in order
            ctx.stored(ctx.learner.result(fut, generation, if_dead={"lag": []}), row)  # no lags from a dead one
        t2 = time.perf_counter()
        if not ctx.budget.winding_up():
            self._reanalyze(row)
        t3 = time.perf_counter()
        ctx.counters["epochs"] += 1
        if ctx.counters["epochs"] % s.sync_every == 0 and ctx.counters["updates"] > 0:
            ctx.learner.publish()
        every = ctx.config.testing.every
        if every and ctx.counters["epochs"] % every == 0 and ctx.counters["updates"] > 0 \
                and not ctx.budget.winding_up():
            row.tested(ctx.test())
        t4 = time.perf_counter()
        for k, v in (("act", t1 - t0), ("learn", t2 - t1), ("reanalyze", t3 - t2), ("test", t4 - t3)):
            row.add(f"time/{k}_s", v)

    def _act(self, row: Gathered) -> list:
        """Every live training worker plays a segment; their episodes go to the learner in worker order, whatever
        finishes first (the same run on every backend). The learner calls' futures, with their generation."""
        ctx = self.ctx
        ctx.fleet.revive(block=not ctx.fleet.live("train"))
        generation = ctx.learner.generation
        calls = [ctx.pending(ctx.fleet.act(sl, ctx.acting_params()), "act", sl, generation=generation)
                 for sl in ctx.fleet.live("train")]
        stored = []
        for call in calls:
            result = ctx.collect(call)
            if isinstance(result, Lost):
                continue
            episodes, metrics = result
            sl = call.slot
            sl.busy_s = float(metrics.get("acting/busy_s", sl.busy_s))
            stored.append((ctx.insert(episodes, metrics, row), ctx.learner.generation))
        return stored

    def _learn(self, row: Gathered) -> None:
        """The updates that keep ``updates * batch_size`` at ``samples_per_env_step`` x the positions fed."""
        ctx, s = self.ctx, self.ctx.config.schedule
        due = math.floor(s.samples_per_env_step * ctx.ledger.fed() / s.batch_size)
        todo = max(due - ctx.counters["updates"], 0)
        out = ctx.learner.train(todo, s.batch_size, ctx.lr_scale()) if todo else {}
        if out is None:  # the learner died: restored, with the counters of its checkpoint
            out, todo = {}, 0
        ctx.counters["updates"] += todo
        row.add_all(out)
        row.add("train/updates_this_epoch", todo)

    def _reanalyze(self, row: Gathered) -> None:
        """Reanalyze workers take batches in turn until the positions owed are done (or replay has none)."""
        ctx = self.ctx
        due = ctx.ledger.reanalyze_due()
        if due <= 0:
            return
        per_call = ctx.config.reanalyze.positions_per_call
        generation = ctx.learner.generation
        target = ctx.reanalyze_target(reuse=False)
        slots = ctx.fleet.live("reanalyze")
        while due > 0 and slots:
            jobs = []
            for sl in slots:
                if due <= 0:
                    break
                batch = ctx.learner.reanalyze_batch(min(per_call, due))
                if not batch["ids"]:
                    return
                due -= sum(int(t.last) + 1 for t in batch["trajectories"])
                jobs.append(ctx.pending(ctx.reanalyze_later(sl, target, batch), "reanalyze", sl, generation=generation))
            for call in jobs:
                result = ctx.collect(call)
                if not isinstance(result, Lost):
                    ctx.reanalyzed(result, row)
                elif result.learner:  # restored from its checkpoint: this epoch's reanalysis ends here
                    return
                else:
                    slots.remove(call.slot)
