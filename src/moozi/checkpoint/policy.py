"""The run's checkpoint policy: what one run saves, keeps, holds as best and restores, in one class.

A run's ``checkpoints/`` folder holds the periodic checkpoints (pruned to ``keep``; the replay part in some),
``kept/`` (params every ``keep_every_updates``, never pruned) and ``best/`` (the params a test or gate chose,
one). :class:`RunCheckpoints` owns those rules; the learner it saves is any object with the learner's state
methods (``state_dict``, ``load_state_dict``, ``template``, ``params``, ``books_state_dict``,
``load_books_state_dict`` and a ``replay`` with ``checkpoint_chunks`` / ``load_chunks``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable

from moozi.checkpoint.encoding import CheckpointError
from moozi.checkpoint.files import read_chunked_part, read_part_bytes
from moozi.checkpoint.folders import PendingCheckpoint, checkpoint_name, list_checkpoints
from moozi.checkpoint.loading import find_latest, load_checkpoint

BEST_DIR = "best"  # checkpoints/best: the params with the best test score (testing.keep_best), or best-gated
KEPT_DIR = "kept"  # checkpoints/kept: params every output.keep_every_updates, never pruned (for sweeps)


class RunCheckpoints:
    """Save, keep, best and restore for one run folder.

    ``keep``: periodic checkpoints kept (``output.keep_checkpoints``); ``keep_every``: params kept every this many
    updates (``output.keep_every_updates``, 0: never); ``replay_every``: how often a checkpoint holds the replay
    (``output.replay_every_checkpoints``, for the warning of an inexact resume); ``load_best``: reads
    ``checkpoints/best`` as ``{'version', 'params'}`` (raises ``CheckpointError`` / ``OSError`` when there is none).
    """

    def __init__(self, run_dir: str | Path, learner: Any, keep: int, keep_every: int, replay_every: int,
                 load_best: Callable[[], dict]):
        self.directory = Path(run_dir) / "checkpoints"
        self.learner = learner
        self.keep, self.keep_every, self.replay_every = keep, keep_every, replay_every
        self._load_best = load_best
        self._best: dict | None = None  # checkpoints/best's params, as published: acting.play_best's
        self._best_read = False

    def save(self, step: int, parts: dict, meta: dict, with_replay: bool) -> dict:
        """Write one checkpoint: the learner's parts here, ``parts`` (name -> encoded bytes) from the workers.

        The replay is streamed a chunk at a time (its live steps only), so the write needs little memory
        beyond the buffer. Returns ``{"path", "metrics"}``: what the write cost (``checkpoint/*``)."""
        from moozi.observe.memory import PeakRss

        directory, t = self.directory, time.perf_counter()
        try:
            with PeakRss() as peak:
                pending = PendingCheckpoint(directory, step)
                try:
                    pending.write_part("learner", self.learner.state_dict())
                    if with_replay:
                        pending.write_chunked("replay", *self.learner.replay.checkpoint_chunks())
                        pending.write_part("books", self.learner.books_state_dict())
                    for name, data in parts.items():
                        pending.write_encoded(name, data)
                except BaseException:
                    pending.abort()
                    raise
                path = pending.commit(meta, keep=self.keep, keep_part="replay")
        except OSError as e:  # a full or read-only disk: say what was kept
            previous = list_checkpoints(directory)
            kept = (f"the previous checkpoint {directory / checkpoint_name(previous[-1].step)} is intact" if previous
                    else "no earlier checkpoint exists")
            raise CheckpointError(f"the checkpoint at update {step} was not written to {directory} "
                                  f"({e.strerror or e}); {kept}") from e
        try:
            self._keep_params(step, meta)
        except OSError as e:  # the checkpoint itself is committed: say so
            raise CheckpointError(f"the checkpoint at update {step} was written ({path}), but its params were not "
                                  f"kept in {directory / KEPT_DIR} ({e.strerror or e})") from e
        metrics = {"checkpoint/write_s": time.perf_counter() - t,
                   "checkpoint/bytes": float(sum(p["bytes"] for p in pending.parts.values()))}
        if with_replay:
            metrics["checkpoint/replay_bytes"] = float(pending.parts["replay"]["bytes"])
        if peak.extra_mb is not None:
            metrics["checkpoint/peak_extra_mb"] = peak.extra_mb
        return {"path": str(path), "metrics": metrics}

    def _keep_params(self, step: int, meta: dict) -> None:
        """At the first checkpoint past each ``keep_every`` updates, keep the current params in
        ``checkpoints/kept`` (a params-only checkpoint, as ``best``; never pruned)."""
        directory = self.directory / KEPT_DIR
        kept = list_checkpoints(directory)
        if not self.keep_every or step // self.keep_every <= (kept[-1].step // self.keep_every if kept else 0):
            return
        version, params = self.learner.params()
        self._write_params(directory, step, {"published": params, "version": int(version)}, meta, keep=10**9)

    @staticmethod
    def _write_params(directory: Path, step: int, part: dict, meta: dict, keep: int) -> Path:
        pending = PendingCheckpoint(directory, step)
        try:
            pending.write_part("learner", part)
        except BaseException:
            pending.abort()
            raise
        return pending.commit(meta, keep=keep)

    def save_best(self, published: dict, meta: dict) -> str:
        """Keep ``published`` (the params a test just scored best with) as ``checkpoints/best``.

        A checkpoint folder of its own with one part, ``learner`` = ``{"published": params}``, so it is read like
        any checkpoint; ``meta`` says when and with what score. One is kept; a failed write leaves the previous one.
        """
        path = self._write_params(self.directory / BEST_DIR, int(meta["counters"]["updates"]),
                                  {"published": published["params"], "version": int(published["version"])},
                                  meta, keep=1)
        self._best, self._best_read = {"version": int(published["version"]), "params": published["params"]}, True
        return str(path)

    def best(self) -> dict | None:
        """``checkpoints/best``'s params as published (``{'version', 'params'}``; None before there is one): what
        training workers act with under ``acting.play_best``. A resumed run reads them from the run's folder."""
        if not self._best_read:
            self._best_read = True
            try:
                self._best = self._load_best()
            except (CheckpointError, FileNotFoundError, OSError):
                self._best = None
        return self._best

    def restore(self, worker_parts: list[str]) -> dict:
        """Load the newest checkpoint whose every part is good; return its metadata, path and the workers'
        parts (encoded). A corrupt one, whichever part is bad, is set aside (``checkpoints/rejected``) and
        listed in ``rejected``; the replay comes from the same checkpoint or, when it holds none, from the
        newest good one that does (then the resume is not exact)."""
        directory, rejected = self.directory, []
        path, record = find_latest(directory, parts=["learner"], set_aside=True, rejected=rejected)
        # find_latest checked every part's checksum: reading them again only checks sizes
        parts, meta = load_checkpoint(path, {"learner": self.learner.template()}, parts=["learner"], verified=True)
        if "replay" in record["parts"]:
            replay_path, replay_record = path, record
        else:
            replay_path, replay_record = find_latest(directory, parts=["replay"], set_aside=True, rejected=rejected)
            logging.getLogger("moozi").warning(
                "replay restored from the older checkpoint %s (output.replay_every_checkpoints = %d): "
                "this resume is not exact", replay_path, self.replay_every)
        self.learner.load_state_dict(parts["learner"])
        self.learner.replay.load_chunks(*read_chunked_part(replay_path, "replay", verified=True))
        if "books" in replay_record["parts"]:
            self.learner.load_books_state_dict(load_checkpoint(replay_path, parts=["books"], verified=True)[0]["books"])
        encoded = {name: read_part_bytes(path, name) for name in worker_parts if name in record["parts"]}
        return {"meta": meta, "path": str(path), "parts": encoded, "rejected": rejected}
