"""The run's counting (moozi.driver.ledger), by hand-computed numbers."""

from types import SimpleNamespace

import pytest

from moozi.driver.ledger import Ledger


def _ledger(fraction=0.0, count_in_ratio=True):
    return Ledger(SimpleNamespace(reanalyze=SimpleNamespace(fraction=fraction, count_in_ratio=count_in_ratio)))


def test_fed_counts_acted_steps_since_ready_and_reanalyzed_positions_when_they_count():
    led = _ledger(fraction=0.5)
    led.counters.update(env_steps=1000, ready_env_steps=200, reanalyzed_positions=300)
    assert led.fed() == 800 + 300
    assert _ledger(fraction=0.5, count_in_ratio=False).fed() == 0
    off = _ledger(fraction=0.5, count_in_ratio=False)
    off.counters.update(env_steps=1000, ready_env_steps=200, reanalyzed_positions=300)
    assert off.fed() == 800


@pytest.mark.parametrize("fraction,updates,due", [(0.5, 1, 100 - 30), (0.2, 1, 25 - 30), (0.5, 0, 0), (0.0, 5, 0)])
def test_reanalyze_due_is_fraction_over_one_minus_fraction_of_env_steps_less_done(fraction, updates, due):
    led = _ledger(fraction=fraction)
    led.counters.update(env_steps=100, updates=updates, reanalyzed_positions=30)
    assert led.reanalyze_due() == due  # 0.2 / 0.8 * 100 = 25: already 5 ahead


def test_a_segment_and_a_reanalyze_result_are_counted_into_the_counters_and_the_row():
    from moozi.driver.rows import Gathered

    led, row = _ledger(), Gathered()
    metrics = {"acting/env_steps": 64, "acting/busy_s": 1.5, "acting/version": 3, "acting/root_value": 0.25}
    led.count_segment([], metrics, row, version=5)
    assert led.counters["env_steps"] == 64 and led.counters["episodes"] == 0
    assert row.values == {"acting/version": [3], "acting/root_value": [0.25]} and row.segment_lags == [2]
    led.count_reanalyzed({"reanalyze/positions": 16, "reanalyze/kl": 0.1}, {"reanalyze/busy_s": 2.0}, row)
    assert led.counters["reanalyzed_positions"] == 16 and row.values["reanalyze/kl"] == [0.1] and "reanalyze/busy_s" not in row
    led.restore({"env_steps": 7})  # an older checkpoint without the other counters
    assert led.counters["env_steps"] == 7 and led.counters["reanalyzed_positions"] == 0


def test_run_rates_count_simulations_of_acting_and_reanalyze_and_the_replay_ratio_by_hand():
    """1000 env steps searched with 16 simulations and 300 reanalyzed positions with 50: 31,000 simulations in
    10 s; 30 updates of 64 over 800 + 300 positions fed: 1920 / 1100; no GPU sample: None."""
    from moozi.driver.ledger import run_rates, simulations

    config = SimpleNamespace(reanalyze=SimpleNamespace(fraction=0.5, count_in_ratio=True),
                             planner=SimpleNamespace(num_simulations=16),
                             reanalyze_planner=SimpleNamespace(num_simulations=50),
                             schedule=SimpleNamespace(batch_size=64))
    counters = dict(env_steps=1000, ready_env_steps=200, reanalyzed_positions=300, updates=30, wall_s=10.0)
    assert simulations(counters, config) == 31_000
    assert run_rates(counters, config) == {"simulations_per_s": 3100.0, "replay_ratio": pytest.approx(1920 / 1100),
                                           "device_busy_fraction": None}
    assert run_rates(dict(counters, wall_s=0.0, updates=0, env_steps=200), config, 0.5) == {
        "simulations_per_s": 0.0, "replay_ratio": 0.0, "device_busy_fraction": 0.5}  # 300 reanalyzed still fed


@pytest.mark.parametrize("steps,episodes,out_of_time,says", [
    (0, 0, True, "before the first env step was counted (compiling the first epoch took all of it): give more --minutes"),
    (0, 0, False, "no episode has ended in 0 env steps"),  # still compiling, or an endless game: not yet judged
    (512, 0, True, "no episode has ended in 512 env steps: only finished episodes go to replay; cap episode length"),
    (512, 3, True, "the time limit ended before the first update (3 episodes (512 env steps) played; training starts "
                   "once replay holds schedule.min_replay_steps = 1000 steps): give more --minutes"),
    (512, 3, False, "3 episodes (512 env steps) played; training starts once replay holds schedule.min_replay_steps"),
])
def test_why_no_update_names_the_cause(steps, episodes, out_of_time, says):
    # A 2048 run given 4 minutes on a busy machine compiled for all of them and was told to cap its episodes.
    led = Ledger(SimpleNamespace(schedule=SimpleNamespace(min_replay_steps=1000)))
    led.counters.update(env_steps=steps, episodes=episodes)
    why = led.why_no_update(out_of_time)
    assert says in why
    assert why.endswith("give more --minutes") == out_of_time
