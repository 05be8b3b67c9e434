"""The run's metrics rows: what the schedules gathered since the last row (a :class:`Gathered`), averaged, with
the counters, throughput (env steps, updates and search simulations per second; the GPU's busy fraction where
there is one), the replay ratio and its error, policy lags, each training worker's busy fraction,
memory, replay statistics and the health verdict."""

from __future__ import annotations

import logging
import time
from typing import Callable

import numpy as np

from moozi.driver.ledger import run_rates, simulations
from moozi.observe.machine import gpu_busy_fraction

log = logging.getLogger("moozi")


class Gathered:
    """What the schedules gathered since the last metrics row: each metric's values (a row writes their mean), the
    policy lags of the inserted steps and of the segments (a row writes their spread), and the newest test's
    metrics, which replace the last ones (one test per row)."""

    def __init__(self):
        self.values: dict[str, list[float]] = {}
        self.inserted_lags: list[float] = []
        self.segment_lags: list[float] = []

    def add(self, key: str, value: float) -> None:
        self.values.setdefault(key, []).append(value)

    def add_all(self, metrics: dict) -> None:
        """One value for each metric of ``metrics``."""
        for key, value in metrics.items():
            self.add(key, value)

    def extend(self, key: str, values) -> None:
        self.values.setdefault(key, []).extend(values)

    def tested(self, metrics: dict) -> None:
        """A test's metrics: the row keeps this one's."""
        self.values.update({key: [value] for key, value in metrics.items()})

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def __bool__(self) -> bool:
        return bool(self.values or self.inserted_lags or self.segment_lags)

    def clear(self) -> None:
        self.values.clear()
        self.inserted_lags.clear()
        self.segment_lags.clear()


def spread(prefix: str, values) -> dict[str, float]:
    """Mean, 95th percentile and maximum of ``values`` as ``{prefix}_mean`` etc. ({} when there are none)."""
    v = np.asarray(values, np.float64)
    if v.size == 0:
        return {}
    return {f"{prefix}_mean": float(v.mean()), f"{prefix}_p95": float(np.percentile(v, 95)),
            f"{prefix}_max": float(v.max())}


def ratio_metrics(counters: dict, fed: int, batch_size: int, samples_per_env_step: float,
                  since: tuple[int, int]) -> dict[str, float]:
    """The replay ratio achieved over the run and over the row's window (``since``: updates and positions fed
    at the last row), its relative error, and the learner's reuse per env step when reanalyzed positions count."""
    out: dict[str, float] = {}
    u0, fed0 = since
    acted = counters["env_steps"] - counters["ready_env_steps"]
    if fed <= 0 or counters["updates"] <= 0:
        return out
    achieved = counters["updates"] * batch_size / fed
    out["ratio/achieved"] = achieved
    out["ratio/error"] = achieved / samples_per_env_step - 1.0
    if fed != acted and acted > 0:
        out["ratio/per_env_step"] = counters["updates"] * batch_size / acted
    if fed > fed0 and u0 > 0:
        out["ratio/window"] = (counters["updates"] - u0) * batch_size / (fed - fed0)
    return out


RECENT_S = 900.0
"""The window of :meth:`RowWriter.env_steps_per_s` (the rate a run's closing line estimates the rest from)."""


def recent_rate(marks: list[tuple[float, int]], now: float, steps: int, window_s: float) -> tuple[float, float]:
    """Steps per second from the newest mark ``(time, steps)`` at least ``window_s`` old to ``(now, steps)``, or
    from the oldest mark where none is that old (``marks`` ordered by time, the first being the start); and the
    seconds between. ``(0.0, 0.0)`` when no time has passed."""
    t0, s0 = marks[0]
    for t, s in marks:
        if now - t < window_s:
            break
        t0, s0 = t, s
    return ((steps - s0) / (now - t0), now - t0) if now > t0 else (0.0, 0.0)


def _kept_marks(marks: list[tuple[float, int]], now: float, window_s: float) -> list[tuple[float, int]]:
    """``marks`` less those no rate will start from again: of the marks at least ``window_s`` old, only the
    newest stays."""
    old = [i for i, (t, _) in enumerate(marks) if now - t >= window_s]
    return marks[old[-1]:] if old else marks


class RowWriter:
    """Writes the rows of one run.

    ctx: the :class:`~moozi.driver.context.RunContext`. metrics: the run's
    :class:`~moozi.observe.metrics.MetricsWriter`. watch: its :class:`~moozi.observe.health.HealthWatch`.
    remote: components run in other processes (their memory is sampled). progress: ``(counters, row, last_test)``
    called after each row (the CLI's display), or None.
    """

    def __init__(self, ctx, metrics, watch, remote: bool, progress: Callable | None):
        self.ctx, self.metrics, self.watch, self.remote, self.progress = ctx, metrics, watch, remote, progress
        self.start()

    def start(self) -> None:
        """The next row's interval begins now."""
        c = self.ctx.counters
        self._since = (time.monotonic(), c["env_steps"], c["updates"])
        self._marks = [self._since[:2]]  # (time, env steps) at the start and at each row since (its recent rate)
        self._fed = self.ctx.ledger.fed()
        self._sims = simulations(c, self.ctx.config)
        self._busy_samples: list[float] = []  # the GPU's busy fraction at each row (none on a CPU)
        self.epochs = c["epochs"]  # the counter at the last row (rows every ``output.log_every_epochs``)
        self._busy: dict[str, float] = {}
        self._histogram_mark = c["updates"] // max(self.ctx.config.output.histogram_every_updates, 1)

    def env_steps_per_s(self, window_s: float = RECENT_S) -> tuple[float, float]:
        """Env steps per second over the last ``window_s`` seconds of this invocation (measured from the newest
        row at least that old), or over the whole invocation (start-up and compiling included) while it is
        younger; and the seconds it was measured over. A sitting that shared the machine for a while and then
        ran alone gives the rate it runs at now, not its average."""
        return recent_rate(self._marks, time.monotonic(), self.ctx.counters["env_steps"], window_s)

    def write(self, rows: Gathered) -> None:
        """One row from what was gathered: each metric averaged over the epochs that reported it, with the rest
        (see the module doc)."""
        ctx = self.ctx
        c, s = ctx.counters, ctx.config.schedule
        out = {key: float(np.mean(values)) for key, values in rows.values.items() if values}
        out.update(spread("lag/inserted", rows.inserted_lags))
        out.update(spread("lag/segment", rows.segment_lags))
        now = time.monotonic()
        t0, s0, u0 = self._since
        dt = max(now - t0, 1e-9)
        out["perf/env_steps_per_s"] = (c["env_steps"] - s0) / dt
        out["perf/updates_per_s"] = (c["updates"] - u0) / dt
        sims = simulations(c, ctx.config)
        out["perf/simulations_per_s"] = (sims - self._sims) / dt
        busy = gpu_busy_fraction()
        if busy is not None:
            out["perf/device_busy_fraction"] = busy
            self._busy_samples.append(busy)
        fed = ctx.ledger.fed()
        out.update(ratio_metrics(c, fed, s.batch_size, s.samples_per_env_step, (u0, self._fed)))
        out.update(self._workers(dt))
        out.update(self._replay())
        if "reanalyze/positions" in rows:
            out["reanalyze/positions_total"] = float(c["reanalyzed_positions"])
        out.update({k: c[k] for k in ("env_steps", "updates", "epochs", "episodes", "wall_s")})
        out["params_version"] = ctx.learner.version
        out.update(self._histograms())
        out.update(self.watch.check(out))
        self.metrics.write(out, step=c["env_steps"])
        self._since = (now, c["env_steps"], c["updates"])
        self._marks = _kept_marks(self._marks + [(now, c["env_steps"])], now, RECENT_S)
        self._fed, self.epochs, self._sims = fed, c["epochs"], sims
        if self.progress:
            self.progress(dict(c), out, ctx.last_test)

    def summary(self) -> dict:
        """The run's summary figures (:func:`~moozi.driver.ledger.run_rates`), the GPU's busy fraction averaged
        over this invocation's rows (None on a CPU)."""
        busy = float(np.mean(self._busy_samples)) if self._busy_samples else None
        return run_rates(self.ctx.counters, self.ctx.config, busy)

    def _histograms(self) -> dict[str, float]:
        """At the first row past every ``output.histogram_every_updates`` updates: the learner's parameter and
        gradient-average histograms to TensorBoard; the seconds it took (``perf/histograms_s``)."""
        every, updates = self.ctx.config.output.histogram_every_updates, self.ctx.counters["updates"]
        if not every or updates // every <= self._histogram_mark:
            return {}
        t = time.perf_counter()
        self._histogram_mark = updates // every
        try:
            for key, h in self.ctx.learner.histograms().items():
                self.metrics.write_histogram_raw(key, h, step=self.ctx.counters["env_steps"])
        except Exception as e:  # a picture is not worth a run
            log.warning("parameter histograms not written: %s", e)
        return {"perf/histograms_s": time.perf_counter() - t}

    def _workers(self, dt: float) -> dict[str, float]:
        """Each training worker's busy fraction over the row's ``dt`` seconds, restarts, and memory."""
        fleet, out = self.ctx.fleet, {}
        for name, sl in fleet.slots.items():
            if sl.kind == "train":
                prev = self._busy.get(name, 0.0)
                out[f"workers/{name}/busy_fraction"] = max(sl.busy_s - prev, 0.0) / dt
                self._busy[name] = sl.busy_s
        out["workers/restarts"] = float(self.ctx.counters["restarts"])
        if fleet.placing:
            fleet.update_placement()
        out.update(self.ctx.backend.stats(fleet.local_pids(self.remote)))
        return out

    def _replay(self) -> dict:
        """Replay statistics. Sync: asked now (the learner is idle between phases). Async: the answer to the
        request made at an earlier row (the driver never waits behind a training call)."""
        learner = self.ctx.learner
        try:
            return learner.stats() if self.ctx.config.schedule.kind != "async" else learner.stats_without_waiting()
        except Exception as e:  # a row without replay statistics is better than a lost run
            log.warning("replay statistics unavailable: %s", e)
            return {}
