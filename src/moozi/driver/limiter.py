"""The async schedule's rate limiter (as Reverb's ``SampleToInsertRatio``): a worker's segment or a learner call
starts only while trained samples stay within ``ratio_slack`` of ``samples_per_env_step`` x inserted positions, and
a learner call only while no segment in flight would fall more than ``max_policy_lag`` versions behind.
Plain arithmetic over the ledger; the schedule says what is in flight."""

from __future__ import annotations

MAX_LEARNER_CALLS = 2  # the next call waits in the learner's queue, so it never idles between calls


class RateLimiter:
    """config: the run's config (``schedule``, ``acting``, ``env``); ledger: its :class:`~moozi.driver.ledger.Ledger`.

    ``segment``: env steps in one worker's segment. ``slack``: samples the learner may run ahead or behind
    (``schedule.ratio_slack``, or by default one learner call plus one segment's worth).
    """

    def __init__(self, config, ledger):
        self.schedule, self.ledger = config.schedule, ledger
        s = config.schedule
        self.segment = config.acting.steps_per_epoch * config.env.num_envs
        self.slack = s.ratio_slack or int(s.updates_per_call * s.batch_size + self.segment * s.samples_per_env_step)

    def can_act(self, acting: int, ready: bool) -> bool:
        """Whether a training worker may start a segment (``acting`` segments already in flight): always while
        replay fills, then within the rate limit.

        The limit holds from the moment replay is ready, not from the first finished update: otherwise
        the workers run free while the learner's first call compiles (~25k steps of breakout under Ray)
        and the learner then trains on that data alone until it catches up (Reverb's limiter also
        applies from ``min_size_to_sample`` on).
        """
        if not ready:
            return True  # filling replay: nothing to wait for
        s, updates = self.schedule, self.ledger.counters["updates"]
        ahead = s.samples_per_env_step * (self.ledger.fed() + (acting + 1) * self.segment) - updates * s.batch_size
        return ahead <= self.slack

    def can_learn(self, learning: int, acting_versions: list[int], version: int) -> bool:
        """Whether to queue another learner call (``learning`` in flight, segments in flight acting with params
        ``acting_versions``, ``version`` published now): at most two in flight, within the rate limit and the
        policy lag."""
        s = self.schedule
        if learning >= MAX_LEARNER_CALLS:
            return False
        samples = (self.ledger.counters["updates"] + (learning + 1) * s.updates_per_call) * s.batch_size
        if samples > s.samples_per_env_step * self.ledger.fed() + self.slack:
            return False
        return not acting_versions or version + learning + 1 - min(acting_versions) <= s.max_policy_lag
