"""``schedule.kind: device`` (issue 89): for a JAX-native game, acting, the replay and learning run in the learner
as one compiled chunk per call (:class:`moozi.fused.DeviceLoop`); the driver only counts, publishes, tests and
checkpoints between calls.

A call is ``schedule.epochs_per_call`` epochs, each a segment of the training actor's ``T`` steps on ``B``
environments written to the ring, then the updates the replay ratio owes for it (``samples_per_env_step x B x T
/ batch_size``, rounded). Until the ring holds ``schedule.min_replay_steps`` sampleable positions a call only
acts. The tester plays the published params as in the other schedules; the params are published after every
call. Reanalyze, the Ray backend and the options listed in :func:`moozi.fused.check_device_schedule` are refused."""

from __future__ import annotations

import time

from moozi.driver.rows import Gathered


class DeviceSchedule:
    """Calls of the learner's device loop over a :class:`~moozi.driver.context.RunContext`."""

    def __init__(self, ctx):
        self.ctx = ctx

    def epoch(self, row: Gathered) -> None:
        """One call (``epochs_per_call`` epochs); its metrics gathered into ``row``."""
        ctx, c = self.ctx, self.ctx.counters
        if ctx.budget.winding_up():  # out of time or stopping: a chunk cannot be cut, so none starts
            return
        t0 = time.perf_counter()
        filling = not (c["updates"] > 0 or ctx.learner.device_ready(ctx.config.schedule.min_replay_steps))
        out = ctx.learner.device_act() if filling else ctx.learner.device_run(ctx.lr_scale())
        if out is None:  # the learner died: restored from its checkpoint, with its counters
            return
        t1 = time.perf_counter()
        before = c["epochs"]
        c["env_steps"] += out["env_steps"]
        c["epochs"] += out["epochs"]
        c["episodes"] += len(out["returns"])
        c["updates"] += out.get("updates", 0)
        if filling:  # the replay ratio counts the steps acted from readiness on (as the sync schedule's)
            c["ready_env_steps"] = c["env_steps"]
        row.add_all(out.get("metrics", {}))
        row.add("train/updates_this_epoch", out.get("updates", 0) / out["epochs"])
        row.add("acting/temperature", out["temperature"])
        row.extend("train/episode_return", out["returns"])
        row.extend("train/episode_length", out["lengths"])
        if c["updates"] > 0:
            ctx.learner.publish()
        every = ctx.config.testing.every
        if every and c["epochs"] // every > before // every and c["updates"] > 0 and not ctx.budget.winding_up():
            row.tested(ctx.test())
        row.add("time/chunk_s", t1 - t0)
        row.add("time/test_s", time.perf_counter() - t1)
