"""The learner as the driver sees it: typed calls, the published params and their version, and the restore of a
dead learner. The only module that names the learner's methods.

A blocking call to a dead learner restores it once from the last checkpoint (see :meth:`LearnerClient.recover`)
and is repeated, except for calls whose arguments the restore makes wrong (``train``'s update count, ``save``'s
counters): those return ``None``. Calls in flight carry the learner's *generation* when they were made, so that
of several calls failing on one death only the first restores.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from moozi.driver.backend import WorkerDied

log = logging.getLogger("moozi")

LEARNER = "learner"  # the learner's component name (a worker's failed call names who died)


class LearnerClient:
    """The run's learner.

    backend: hosts it. spawn: ``() -> handle`` builds a new learner (not yet placed). placed: ``(handles) -> None``
    waits for built components and records where they run. on_restored: called after a new learner replaced a dead
    one, before its params are asked for (the driver restores the counters from the checkpoint it loaded).
    """

    def __init__(self, backend, spawn: Callable[[], Any], placed: Callable[[list], None],
                 on_restored: Callable[[], None], track_best: bool = False):
        self.backend, self._spawn, self._placed, self._on_restored = backend, spawn, placed, on_restored
        self.generation = 0  # restorations so far
        self.handle = spawn()
        self.published = None  # a future of the last published params (workers get them by reference)
        self.version = 0
        self.track_best = track_best  # acting.play_best: keep a reference to checkpoints/best's params
        self.best = None  # a future of them (None: no best yet)
        self._stats_request = None  # async: replay statistics asked for at the last metrics row

    # --- faults -------------------------------------------------------------------------

    def recover(self, error: Exception, generation: int) -> None:
        """The learner died: a new one, restored by ``on_restored`` from the last checkpoint (or fresh).

        ``generation``: the learner a failed call went to. Every call in flight to a dead learner fails;
        only the first failure restores, the others (an older generation) find the new learner in place.
        """
        if generation != self.generation:
            return
        self.generation += 1
        self._stats_request = None
        log.warning("the learner died (%s); restoring it from the last checkpoint", error)
        self.close()
        self.handle = self._spawn()
        self._placed([self.handle])
        self._on_restored()
        self.refresh()

    def _blocking(self, method: str, *args):
        generation = self.generation
        try:
            return self.backend.get(self.backend.call(self.handle, method, *args))
        except WorkerDied as e:
            self.recover(e, generation)
            return self.backend.get(self.backend.call(self.handle, method, *args))

    def _once(self, method: str, *args):
        return self.result(self.backend.call(self.handle, method, *args), self.generation)

    def result(self, future, generation: int, if_dead=None):
        """The result of a call made under ``generation``, or ``if_dead`` if the learner died meanwhile
        (it is restored, once)."""
        try:
            return self.backend.get(future)
        except WorkerDied as e:
            self.recover(e, generation)
            return if_dead

    def close(self) -> None:
        try:
            self.backend.kill(self.handle)
        except Exception:  # already gone
            pass

    # --- params -------------------------------------------------------------------------

    def refresh(self) -> None:
        """Take the learner's current params as the published ones (a new or restored learner)."""
        self.published = self.backend.call(self.handle, "params")
        self.version = int(self.backend.get(self.published)["version"])
        if self.track_best:
            self._refresh_best()

    def _refresh_best(self) -> None:
        future = self.backend.call(self.handle, "best")
        self.best = future if self.backend.get(future) is not None else None

    def publish(self) -> None:
        # The params stay in the object store until a worker needs them: the driver never fetches them,
        # it only counts (the learner's version goes up by one per publish).
        self.published = self.backend.call(self.handle, "publish")
        self.version += 1

    def published_by(self, future, result: dict) -> None:
        """A ``train_and_publish`` call finished: its future is the published object."""
        self.published = future
        self.version = int(result["version"])

    def target_params(self):
        """Future of the target network's params (what reanalyze searches with)."""
        return self.backend.call(self.handle, "target_params")

    def checksum(self) -> float:
        return float(self._blocking("checksum"))

    # --- replay -------------------------------------------------------------------------

    def add_episodes(self, episodes) -> dict:
        return self._blocking("add_episodes", episodes)

    def add_episodes_later(self, episodes):
        """Future of ``add_episodes`` (the learner may be in the middle of a training call)."""
        return self.backend.call(self.handle, "add_episodes", episodes)

    def ready(self, min_steps: int) -> bool:
        return bool(self._blocking("ready", min_steps))

    def reanalyze_batch(self, positions: int) -> dict:
        return self._blocking("reanalyze_batch", positions)

    def reanalyze_batch_later(self, positions: int):
        return self.backend.call(self.handle, "reanalyze_batch", positions)

    def apply_reanalyzed(self, stamp, episodes) -> dict:
        return self._blocking("apply_reanalyzed", stamp, episodes)

    def stats(self) -> dict:
        return self._blocking("stats")

    def histograms(self) -> dict:
        return self._blocking("histograms")

    def stats_without_waiting(self) -> dict:
        """The answer to the request made at an earlier call, once it is in ({} until then), and a new request:
        the learner answers between two training calls, so the driver never waits behind one."""
        out, fut = {}, self._stats_request
        if fut is not None:
            done, _ = self.backend.wait([fut], num_returns=1, timeout=0)
            if not done:
                return {}
            self._stats_request = None
            out = self.backend.get(fut)
        self._stats_request = self.backend.call(self.handle, "stats")
        return out

    # --- training and checkpoints ---------------------------------------------------------

    def train(self, updates: int, batch_size: int, lr_scale: float) -> dict | None:
        """Run ``updates`` updates; ``None`` if the learner died (restored, with its checkpoint's counters)."""
        return self._once("train", updates, batch_size, lr_scale)

    def train_and_publish_later(self, updates: int, batch_size: int, lr_scale: float):
        """Future of a training call that publishes after it (the async schedule's)."""
        return self.backend.call(self.handle, "train_and_publish", updates, batch_size, lr_scale)

    def device_ready(self, min_steps: int) -> bool:
        """The device schedule: the learner's ring can be trained on."""
        return bool(self._blocking("device_ready", min_steps))

    def device_act(self) -> dict | None:
        """The device schedule: a segment acted into the ring, nothing learned; ``None`` if the learner died."""
        return self._once("device_act")

    def device_run(self, lr_scale: float) -> dict | None:
        """The device schedule: one chunk of acting and learning; ``None`` if the learner died."""
        return self._once("device_run", lr_scale)

    def save(self, updates: int, parts: dict, meta: dict, with_replay: bool) -> dict | None:
        """Write a checkpoint (``{"path", "metrics"}``); ``None`` if the learner died meanwhile."""
        return self._once("save", updates, parts, meta, with_replay)

    def save_best(self, published, meta: dict):
        path = self._blocking("save_best", published, meta)
        if self.track_best:
            self._refresh_best()
        return path

    def restore(self, workers: list[str]) -> dict:
        """Load the newest good checkpoint; its meta, the parts of ``workers`` and the checkpoints set aside."""
        return self.backend.get(self.backend.call(self.handle, "restore", workers))

    def instance(self):
        """The :class:`~moozi.learner.Learner` object (local backend only)."""
        return self.backend.instance(self.handle).learner
