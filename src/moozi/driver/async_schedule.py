"""``schedule.kind: async`` (IMPALA-style): training workers, the learner, reanalyze workers and the tester run
continuously. The rate limiter (:mod:`moozi.driver.limiter`) starts a segment or a learner call only within the
replay ratio's slack and the policy lag, so the faster side waits on the backend, never by sleeping. The learner
publishes after every call; up to two calls are queued, so it never idles while the driver handles the last
one's result, and the driver never waits on the learner for a metrics row. An epoch is W inserted segments."""

from __future__ import annotations

import time
from typing import Callable

from moozi.driver.context import Lost, Pending
from moozi.driver.limiter import RateLimiter
from moozi.driver.rows import Gathered


class AsyncSchedule:
    """The async loop over a :class:`~moozi.driver.context.RunContext`.

    ``inflight``: each call in flight by its future, as a :class:`~moozi.driver.context.Pending` whose ``info`` is
    the version acted with (act) or the positions asked for (reanalyze).
    """

    def __init__(self, ctx):
        self.ctx = ctx
        self.limiter = RateLimiter(ctx.config, ctx.ledger)
        self.inflight: dict[object, Pending] = {}
        self.idle = {n for n, sl in ctx.fleet.slots.items() if sl.kind in ("train", "reanalyze")}
        self.ready = False
        self.segments = 0  # segments inserted by this invocation (an epoch: one per worker)
        self.test_due_epoch = ctx.counters["epochs"]

    def run(self, should_stop: Callable[[], bool], on_row: Callable[[Gathered], None], row: Gathered) -> None:
        """Until ``should_stop()``, then until the calls in flight are in; ``on_row(row)`` after each result."""
        ctx = self.ctx
        self.ready = ctx.ready()
        stopping = False
        while True:
            stopping = stopping or should_stop()
            if not stopping:
                self._start_work()
            if not self.inflight:
                if stopping:
                    return
                if ctx.fleet.any_dead():
                    ctx.fleet.revive(block=True)  # everything else waits on a worker's restart
                    continue
                raise RuntimeError("async schedule stalled: nothing in flight and nothing allowed to start "
                                   f"(counters {ctx.counters}); please report this")
            t = time.perf_counter()
            done, _ = ctx.backend.wait(list(self.inflight), num_returns=1)
            row.add("time/wait_s", time.perf_counter() - t)
            for fut in done:
                if self._finish(fut, row):
                    on_row(row)

    def _track(self, future, kind: str, slot=None, info=None) -> None:
        self.inflight[future] = self.ctx.pending(future, kind, slot, info)

    def _in_flight(self, kind: str) -> list[Pending]:
        return [call for call in self.inflight.values() if call.kind == kind]

    def _start_work(self) -> None:
        """Start what the limiter allows: segments of idle training workers, reanalyze batches owed, learner
        calls, and a test when one is due."""
        ctx, s = self.ctx, self.ctx.config.schedule
        ctx.fleet.revive()
        per_call = ctx.config.reanalyze.positions_per_call
        for name in sorted(self.idle):
            sl = ctx.fleet.slots[name]
            if sl.handle is None:
                continue
            if sl.kind == "train" and self.limiter.can_act(len(self._in_flight("act")), self.ready):
                self._track(ctx.fleet.act(sl, ctx.acting_params()), "act", sl, ctx.learner.version)
                self.idle.discard(name)
            elif sl.kind == "reanalyze" and self.ready and ctx.ledger.reanalyze_due() - sum(
                    call.info for call in self._in_flight("reanalyze")) > 0:
                target = ctx.reanalyze_target(reuse=True)
                batch = ctx.learner.reanalyze_batch_later(per_call)
                self._track(ctx.reanalyze_later(sl, target, batch), "reanalyze", sl, per_call)
                self.idle.discard(name)
        while self.ready and self.limiter.can_learn(len(self._in_flight("learn")),
                                                    [call.info for call in self._in_flight("act")],
                                                    ctx.learner.version):
            self._track(ctx.learner.train_and_publish_later(s.updates_per_call, s.batch_size, ctx.lr_scale()), "learn")
        every, tester = ctx.config.testing.every, ctx.fleet.slots["tester"]
        if (every and ctx.counters["updates"] > 0 and ctx.counters["epochs"] >= self.test_due_epoch + every
                and tester.handle is not None and not self._in_flight("test")):
            self.test_due_epoch = ctx.counters["epochs"]
            self._track(ctx.test_later(), "test", tester)

    def _finish(self, fut, row: Gathered) -> bool:
        """Take a finished call's result into the counters and ``row``; False if its worker or the learner died."""
        ctx = self.ctx
        call = self.inflight.pop(fut)
        kind, sl = call.kind, call.slot
        result = ctx.collect(call)  # a death is sorted out there: the worker restarted or the learner restored
        if isinstance(result, Lost):
            if sl is not None and kind != "test":
                self.idle.add(sl.name)
            if result.learner:
                self.ready = ctx.ready()
            return False
        if kind == "act":
            self._acted(sl, result, row)
        elif kind == "store":
            ctx.stored(result, row)
        elif kind == "learn":  # the result is the published object: workers get it by reference
            ctx.counters["updates"] += ctx.config.schedule.updates_per_call
            ctx.learner.published_by(fut, result)
            row.add_all(result["metrics"])
        elif kind == "reanalyze":
            ctx.reanalyzed(result, row)
            self.idle.add(sl.name)
        elif kind == "test":
            row.tested(ctx.tested(result))
        return True

    def _acted(self, sl, result, row: Gathered) -> None:
        ctx = self.ctx
        episodes, metrics = result
        sl.busy_s = float(metrics.get("acting/busy_s", sl.busy_s))
        self._track(ctx.insert(episodes, metrics, row), "store")
        self.idle.add(sl.name)
        self.segments += 1  # an epoch: one segment per worker (counted on, so a resumed run goes on)
        if self.segments % ctx.config.distributed.train_workers == 0:
            ctx.counters["epochs"] += 1
        if not self.ready:
            self.ready = ctx.ready()
