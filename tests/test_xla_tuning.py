"""The per-program XLA:CPU options: the switch, the guard against an XLA that lacks them, Ray forwarding."""

from __future__ import annotations

from moozi import xla_tuning


def test_switch_reads_the_environment():
    assert xla_tuning.enabled({}) and xla_tuning.enabled({"MOOZI_XLA_TUNING": "on"})
    for off in ("off", "0", "false", "No", " off ", ""):
        assert not xla_tuning.enabled({"MOOZI_XLA_TUNING": off})
    assert xla_tuning.update_options({"MOOZI_XLA_TUNING": "off"}) is None


def test_options_are_handed_out_only_when_this_xla_knows_them():
    assert xla_tuning.update_options({}) == xla_tuning.UPDATE_OPTIONS  # the pinned jax knows them
    assert xla_tuning.update_options({}) is not xla_tuning.UPDATE_OPTIONS  # a copy: callers cannot change it
    assert not xla_tuning._supported((("xla_cpu_no_such_option", ""),))  # refused: compile with defaults


def test_the_choice_travels_to_ray_workers():
    assert xla_tuning.forward_env({}) == {}
    assert xla_tuning.forward_env({"MOOZI_XLA_TUNING": "off", "OTHER": "1"}) == {"MOOZI_XLA_TUNING": "off"}
