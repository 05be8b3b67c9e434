"""The workers of a run: one slot per training, testing and reanalyze position, each holding its current process.

The fleet spawns them, records where each runs (``workers.json``), restarts a dead one after a doubling backoff
(``distributed.max_restarts`` per slot, new random streams from run seed, worker id and incarnation), saves and
loads their states, and is the only place that names the workers' methods. It never calls the learner: a
call that failed because the learner died is the learner client's to handle.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from dataclasses import dataclass
from typing import Any

from moozi.driver.backend import Resources, WorkerDied
from moozi.files import write_atomic
from moozi.hosts.acting import ActingHost
from moozi.hosts.reanalyze import ReanalyzeHost
from moozi.parts import spec_data

log = logging.getLogger("moozi")

MAX_BACKOFF_S = 30.0
STEADY_S = 60.0  # an incarnation that lived this long starts the backoff over


@dataclass
class Slot:
    """One worker position: what it is, its current process and its history of restarts."""

    name: str
    kind: str  # "train" | "test" | "reanalyze"
    worker_id: int
    handle: Any = None
    incarnation: int = 0
    restarts: int = 0
    busy_s: float = 0.0
    started_at: float = 0.0
    respawn_at: float = 0.0
    backoff_level: int = 0


def plan_slots(config) -> list[Slot]:
    """The run's worker slots: W training workers (the first named ``actor``), the tester, the reanalyzers."""
    d = config.distributed
    workers = 0 if config.schedule.acts_in_learner else d.train_workers  # the device schedule: none
    slots = [Slot("actor" if w == 0 else f"actor_{w}", "train", w) for w in range(workers)]
    slots.append(Slot("tester", "test", 0))
    if config.reanalyze.fraction > 0:
        slots += [Slot(f"reanalyzer_{r}", "reanalyze", r) for r in range(d.reanalyze_workers)]
    return slots


class Fleet:
    """The worker slots of one run.

    backend: hosts the workers. run: the :class:`~moozi.driver.record.RunRecord` (its config; its plain data, which
    the hosts are built from; its folder, where ``workers.json`` goes; the versions a remote worker checks its own
    against, ``None`` locally). counters: the run's counters (``restarts`` is counted here).
    """

    def __init__(self, backend, run, counters: dict):
        self.backend, self.config, self.config_dict = backend, run.config, run.data
        self.run_dir, self.versions, self.counters = run.run_dir, run.versions, counters
        self.spec_data = spec_data(run.spec) if run.spec is not None else None  # hosts read it, never build the game
        self.slots: dict[str, Slot] = {}
        self.placement: dict[str, dict] = {}
        self.placing: dict[str, Any] = {}  # restarted workers not yet placed: name -> their info future
        d = run.config.distributed
        # Per slot kind: the workers' CPUs, and the GPUs (fractions) of that kind on Ray.
        self.resources = {kind: Resources(d.cpus_per_worker, float(gpus)) for kind, gpus in (
            ("train", d.train_worker_gpus), ("test", d.test_worker_gpus), ("reanalyze", d.reanalyze_worker_gpus))}

    # --- processes ----------------------------------------------------------------------

    def start(self, slots: list[Slot], also: list) -> None:
        """Spawn ``slots`` and wait until they and the handles ``also`` (the learner) are built."""
        for sl in slots:
            self.spawn(sl, wait=False)
        self.placed(also + [sl.handle for sl in slots])

    def spawn(self, slot: Slot, wait: bool = True) -> None:
        if slot.kind == "reanalyze":
            slot.handle = self.backend.spawn(slot.name, ReanalyzeHost, self.config_dict, slot.worker_id,
                                             slot.incarnation, self.versions, self.spec_data,
                                             resources=self.resources[slot.kind])
        else:
            slot.handle = self.backend.spawn(slot.name, ActingHost, self.config_dict, slot.kind, slot.worker_id,
                                             slot.incarnation, self.versions, resources=self.resources[slot.kind])
        slot.busy_s = 0.0
        slot.started_at = time.monotonic()
        self.slots[slot.name] = slot
        if wait:
            self.placed([slot.handle])

    def placed(self, handles) -> None:
        """Wait for components to be built; record where each runs (``workers.json``: name, pid, node, CPU)."""
        self.placement.update(self.backend.ready(handles))
        self._write_placement()

    def _write_placement(self) -> None:
        text = json.dumps(self.placement, indent=1)  # whole or not at all: readers (kill tests, watch) poll it
        write_atomic(self.run_dir / "workers.json", lambda tmp: tmp.write_text(text), "the components' placement")

    def restart(self, slot: Slot, error: Exception) -> None:
        """A worker died: its slot gets a new incarnation after a backoff (the driver does not wait for it).

        Restarts are bounded per slot (``distributed.max_restarts``); the backoff doubles from
        ``restart_backoff_s`` up to 30 s, and starts over once an incarnation has lived a minute.
        """
        d = self.config.distributed
        self._kill(slot.handle)
        slot.handle = None
        if slot.restarts >= d.max_restarts:
            raise RuntimeError(f"{slot.name} died {slot.restarts + 1} times (distributed.max_restarts = "
                               f"{d.max_restarts}); last: {error}") from error
        slot.restarts += 1
        self.counters["restarts"] += 1
        now = time.monotonic()
        if now - slot.started_at > STEADY_S:
            slot.backoff_level = 0
        wait = min(d.restart_backoff_s * 2 ** slot.backoff_level, MAX_BACKOFF_S)
        slot.backoff_level += 1
        log.warning("%s died (%s); restarting it in %.1f s (restart %d of at most %d)",
                    slot.name, error, wait, slot.restarts, d.max_restarts)
        slot.respawn_at = now + wait

    def revive(self, block: bool = False) -> None:
        """Start new incarnations of dead slots whose backoff has passed (``block``: wait for the first)."""
        dead = [sl for sl in self.slots.values() if sl.handle is None]
        if not dead:
            return
        if block:
            time.sleep(max(min(sl.respawn_at for sl in dead) - time.monotonic(), 0.0))
        now = time.monotonic()
        for sl in dead:
            if now >= sl.respawn_at:
                sl.incarnation += 1
                self.spawn(sl, wait=False)
                self.placing[sl.name] = self.backend.info(sl.handle)

    def update_placement(self) -> None:
        """Record where restarted workers run, once they are up (never waits)."""
        for name, fut in list(self.placing.items()):
            done, _ = self.backend.wait([fut], num_returns=1, timeout=0)
            if done:
                del self.placing[name]
                try:
                    self.placement[name] = self.backend.get(fut)
                except WorkerDied:
                    continue
        self._write_placement()

    def _kill(self, handle) -> None:
        if handle is None:
            return
        try:
            self.backend.kill(handle)
        except Exception:  # already gone
            pass

    def close(self) -> None:
        for slot in self.slots.values():
            self._kill(slot.handle)

    # --- what the schedules see --------------------------------------------------------

    def live(self, kind: str) -> list[Slot]:
        """The slots of ``kind`` with a process now, in slot order."""
        return [sl for sl in self.slots.values() if sl.kind == kind and sl.handle is not None]

    def any_dead(self) -> bool:
        return any(sl.handle is None for sl in self.slots.values())

    def local_pids(self, remote: bool) -> dict[str, int]:
        """Worker processes on this host by name (for memory statistics); none when nothing is ``remote``."""
        here = socket.gethostname()
        return {n: int(p["pid"]) for n, p in self.placement.items()
                if p.get("hostname", here) == here and n != "driver" and remote}

    def instance(self, name: str):
        """A worker's host object (local backend only)."""
        return self.backend.instance(self.slots[name].handle)

    # --- the workers' methods ------------------------------------------------------------

    def act(self, slot: Slot, published):
        """A training worker plays a segment with ``published`` params: future of ``(episodes, metrics)``."""
        return self.backend.call(slot.handle, "run", published)

    def test(self, published, episodes: int, record: bool):
        """The tester plays ``episodes`` greedy games (``record``: draw one): future of its metrics."""
        return self.backend.call(self.slots["tester"].handle, "test", published, episodes, record)

    def reanalyze(self, slot: Slot, target, batch):
        """A reanalyzer re-searches ``batch`` with ``target`` params: future of ``(stamp, episodes, metrics)``."""
        return self.backend.call(slot.handle, "reanalyze", target, batch)

    def states(self) -> dict[str, bytes]:
        """The states of the acting workers alive now, as bytes (a checkpoint's worker parts)."""
        futures = {n: self.backend.call(s.handle, "state") for n, s in self.slots.items()
                   if s.kind != "reanalyze" and s.handle is not None}
        parts = {}
        for name, fut in futures.items():
            try:
                parts[name] = self.backend.get(fut)
            except WorkerDied:  # its new incarnation starts fresh: nothing of it to save (noticed at its next call)
                pass
        return parts

    def stateful(self) -> list[str]:
        """The names of the slots whose state a checkpoint holds."""
        return [n for n, s in self.slots.items() if s.kind != "reanalyze"]

    def load_state(self, name: str, data: bytes) -> None:
        self.backend.get(self.backend.call(self.slots[name].handle, "load_state", data))
