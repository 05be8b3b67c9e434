"""What happens after each test: its recorded episode is drawn (a GIF and a TensorBoard image), and the tested
params are kept as ``checkpoints/best`` when the mean of the last ``testing.best_window`` tests is the best so far
(unless gating or the grader chooses ``best``)."""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable

import numpy as np

from moozi.checkpoint import CheckpointError, load_checkpoint
from moozi.run_dir import find_checkpoint

log = logging.getLogger("moozi")


class TestKeeper:
    """Drawing and best-keeping for one run's tests, given its collaborators.

    run: the :class:`~moozi.driver.record.RunRecord` (its folder, config, plain data and the game's spec, to draw
    frames).
    metrics: the run's metrics writer (the TensorBoard image).
    save_best: ``(published, meta)`` -> keeps params as ``checkpoints/best`` (the learner's ``save_best``).
    tests: the run's test returns so far, oldest first (shared with the health verdict, which appends them).
    resume: the run goes on from a checkpoint: it starts from the score of the ``best`` it kept.
    """

    __test__ = False  # not a pytest class, whatever imports it

    def __init__(self, run, metrics, save_best: Callable[[Any, dict], Any], tests: list[float], resume: bool = False):
        self.run_dir, self.config, self.config_dict, self.spec = run.run_dir, run.config, run.data, run.spec
        self.metrics, self.save_best, self.tests = metrics, save_best, tests
        self.best_score = self._kept_best_score() if resume else -math.inf

    def record_due(self) -> bool:
        """Whether the next test draws an episode: tests 1, 1 + m, 1 + 2m, ... of the run (m = record_every)."""
        m = self.config.testing.record_every
        return m > 0 and len(self.tests) % m == 0

    def after_test(self, result: dict, published, counters: dict) -> dict:
        """Draw a recorded episode, consider the params for ``best``; the test's metrics."""
        result = dict(result)
        episode = result.pop("_episode", None)
        if episode is not None:
            result["test/draw_s"] = self._draw(episode, counters)
        self._consider_best(result, published, counters)
        return result

    def _draw(self, episode: dict, counters: dict) -> float:
        """Write the GIF and the TensorBoard image of a recorded test game; the seconds it took."""
        from moozi.observe.gif import episode_frames, tensorboard_strip, write_gif

        step = int(counters["updates"])
        t = time.perf_counter()
        try:
            frames = episode_frames(self.spec, episode["trajectory"], episode["agent_seat"])
            path = write_gif(self.run_dir / "gifs" / f"test-{step:09d}.gif", frames)
            self.metrics.write_image("test/episode", tensorboard_strip(frames), counters["env_steps"])
        except (OSError, ValueError) as e:  # a picture is not worth a run
            log.warning("the test episode at update %d was not drawn: %s", step, e)
            return 0.0
        log.debug("test episode drawn: %s", path)
        return time.perf_counter() - t

    def _consider_best(self, result: dict, published, counters: dict) -> None:
        """Keep the tested params as ``checkpoints/best`` when the mean of the last ``best_window`` tests
        (this one included) is at least the best so far (ties: the newer params)."""
        t = self.config.testing
        if not t.keep_best or "test/return_mean" not in result or self.config.gating.every_checkpoints \
                or self.config.grading.keep_best:
            return  # with gating on the gate chooses best, with grading's keep_best the grader
        recent = (self.tests + [float(result["test/return_mean"])])[-t.best_window:]
        score = float(np.mean(recent))
        if len(recent) < t.best_window or score < self.best_score:
            return
        meta = {"counters": dict(counters), "score": score, "tests": recent, "best_window": t.best_window,
                "config": self.config_dict}
        try:
            path = self.save_best(published, meta)
        except (CheckpointError, OSError) as e:
            log.warning("the best params (score %.4g) were not kept: %s", score, e)
            return
        if score > self.best_score:
            log.info("best params so far (mean of the last %d tests %.4g): %s", t.best_window, score, path)
        self.best_score = score

    def _kept_best_score(self) -> float:
        """A resumed run starts from the score of the ``best`` it kept (none: any score is better)."""
        try:
            return float(load_checkpoint(find_checkpoint(self.run_dir, "best"), parts=[])[1]["score"])
        except (CheckpointError, KeyError, TypeError, ValueError):
            return -math.inf
