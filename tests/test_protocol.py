"""MinAtar protocols (moozi.envs.protocol): the named choice a user makes (``train --protocol``), the record
every result states (``eval``'s ``protocol``), the same game on the other package (``eval --package``), the
thesis's test planner (``eval --planner thesis``) and the PPO baseline (``moozi baseline ppo``)."""

import json

import pytest

from moozi.cli import main
from moozi.config import EnvConfig
from moozi.envs import make_env
from moozi.envs.protocol import (
    Protocol,
    counterpart,
    describe,
    follows,
    game_of,
    merge_overrides,
    protocol_overrides,
    summary_line,
)
from moozi.errors import ConfigError

pytest.importorskip("gymnax")
pytest.importorskip("minatar")


def test_the_thesis_protocol_as_overrides_on_each_package():
    # The thesis code: gym.make("MinAtar/<Game>-v1", sticky_action_prob=0.0) under a 7200-move StepLimitWrapper.
    assert protocol_overrides("thesis", "minatar:space_invaders") == {
        "schedule.max_env_steps": 10_000_000, "env.kwargs.sticky_action_prob": 0.0,
        "env.kwargs.minimal_action_set": True, "env.kwargs.max_episode_steps": 7200}
    assert protocol_overrides("thesis", "gymnax:Breakout-MinAtar") == {
        "schedule.max_env_steps": 10_000_000, "env.kwargs.max_episode_steps": 7200}
    # gymnax's Freeway has no end of its own: on the port its 2500 moves are the cap.
    assert protocol_overrides("thesis", "gymnax:Freeway-MinAtar")["env.kwargs.max_episode_steps"] == 2500
    assert protocol_overrides("gymnax", "gymnax:Asterix-MinAtar")["env.kwargs.max_episode_steps"] == 1000
    assert protocol_overrides("gymnax", "minatar:breakout")["env.kwargs.max_episode_steps"] == 1000


def test_a_protocol_refuses_what_it_is_not_for_and_what_contradicts_it():
    with pytest.raises(ConfigError, match="not one of the thesis's MinAtar games"):
        protocol_overrides("thesis", "gymnax:CartPole-v1")
    with pytest.raises(ConfigError, match="allowed thesis, gymnax"):
        protocol_overrides("atari", "minatar:breakout")
    p = protocol_overrides("thesis", "gymnax:Breakout-MinAtar")
    with pytest.raises(ConfigError, match="--protocol thesis sets env.kwargs.max_episode_steps=7200"):
        merge_overrides("thesis", p, ["env.kwargs.max_episode_steps=1000"])
    merged = merge_overrides("thesis", p, ["env.kwargs.max_episode_steps=7200", "model.channels=8"])
    assert merged == ["schedule.max_env_steps=10000000", "env.kwargs.max_episode_steps=7200",
                      "env.kwargs.max_episode_steps=7200", "model.channels=8"]


def test_the_protocol_a_built_game_follows():
    port = describe(make_env("gymnax:Breakout-MinAtar", max_episode_steps=7200), 10_000_000)
    assert port == Protocol("breakout", "gymnax", 0.0, 7200, 10_000_000, "minimal")
    assert follows(port) == "thesis"
    assert follows(describe(make_env("gymnax:Breakout-MinAtar"), 2_000_000)) == "gymnax"  # a shorter budget
    assert follows(describe(make_env("gymnax:Breakout-MinAtar"), 20_000_000)) is None  # more frames than either
    original = describe(make_env("minatar:breakout"), None)  # the bridge's defaults: the MinAtar paper's
    assert original == Protocol("breakout", "minatar", 0.1, None, None, "full") and follows(original) is None
    freeway = describe(make_env("minatar:freeway", sticky_action_prob=0.0, minimal_action_set=True,
                                max_episode_steps=7200), 10_000_000)
    assert freeway.max_episode_steps == 2500 and follows(freeway) == "thesis = gymnax"  # Freeway: the same rules
    assert "thesis" in summary_line(port) and "7,200 moves" in summary_line(port)
    assert describe(make_env("gymnax:CartPole-v1"), None) is None and game_of("pgx:minatar-breakout") is None


def test_the_same_game_and_rules_on_the_other_package():
    port = EnvConfig(name="gymnax:SpaceInvaders-MinAtar", kwargs={"max_episode_steps": 7200}, num_envs=8)
    original = counterpart(port, "minatar")
    assert original == EnvConfig(name="minatar:space_invaders", num_envs=8, kwargs={
        "sticky_action_prob": 0.0, "minimal_action_set": True, "max_episode_steps": 7200})
    assert counterpart(original, "gymnax") == port and counterpart(port, "gymnax") is port
    assert counterpart(EnvConfig(name="gymnax:Freeway-MinAtar"), "minatar").kwargs["max_episode_steps"] == 2500
    with pytest.raises(ConfigError, match="sticky actions"):
        counterpart(EnvConfig(name="minatar:breakout", kwargs={"minimal_action_set": True}), "gymnax")
    with pytest.raises(ConfigError, match="all six actions"):
        counterpart(EnvConfig(name="minatar:breakout", kwargs={"sticky_action_prob": 0.0}), "gymnax")
    # The packages agree on what the model sees and does: the same board shape and the same actions.
    for game, gid in [("breakout", "Breakout-MinAtar"), ("space_invaders", "SpaceInvaders-MinAtar"),
                      ("freeway", "Freeway-MinAtar"), ("asterix", "Asterix-MinAtar")]:
        a, b = make_env(f"minatar:{game}", minimal_action_set=True), make_env(f"gymnax:{gid}")
        assert a.spec.observation_shape == b.spec.observation_shape and a.spec.num_actions == b.spec.num_actions
        assert list(a.action_set) == [int(x) for x in b._env.action_set]  # MinAtar's n l u r d f indices


def test_train_protocol_is_checked_before_any_work(tmp_path, capsys):
    run = tmp_path / "r"
    assert main(["train", "--preset", "cartpole", "--protocol", "thesis", "--run-dir", str(run)]) == 2
    assert "not one of the thesis's MinAtar games" in capsys.readouterr().err
    assert main(["train", "--preset", "breakout", "--protocol", "thesis", "--run-dir", str(run),
                 "env.kwargs.max_episode_steps=1000"]) == 2
    assert "--protocol thesis sets env.kwargs.max_episode_steps=7200" in capsys.readouterr().err
    assert not run.exists()


TINY = ["env.num_envs=2", "acting.steps_per_epoch=4", "schedule.batch_size=4", "schedule.samples_per_env_step=1",
        "schedule.min_replay_steps=1", "testing.every=1000", "schedule.max_env_steps=16", "planner.num_simulations=2",
        "model.channels=4", "model.head_hidden=8", "targets.unroll_steps=2", "replay.capacity=2000"]


def test_a_port_run_played_on_the_original_package_with_the_thesis_test_planner(tmp_path, capsys):
    run = tmp_path / "bo"
    assert main(["train", "--preset", "breakout", "--run-dir", str(run), "env.kwargs.max_episode_steps=40", *TINY]) == 0
    capsys.readouterr()
    assert main(["eval", str(run), "--games", "2", "--package", "minatar", "--planner", "thesis"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["env"] == "minatar:breakout" and out["games"] == 2
    assert out["protocol"] == {"game": "breakout", "package": "minatar", "sticky": 0.0, "max_episode_steps": 40,
                               "max_env_frames": 16, "action_set": "minimal"}
    assert (out["planner"], out["simulations"], out["temperature"]) == ("puct", 40, 0.25)
    assert (out["dirichlet_alpha"], out["dirichlet_fraction"]) == (0.1, 0.1)
    assert main(["eval", str(run), "--games", "2", "--simulations", "3"]) == 0  # the run's own: the port, Gumbel
    own = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert own["env"] == "gymnax:Breakout-MinAtar" and own["protocol"]["package"] == "gymnax"
    assert (own["planner"], own["simulations"]) == ("gumbel", 3) and "gumbel_scale" in own


def test_baseline_ppo_trains_with_rejax_and_plays_both_packages(tmp_path, capsys):
    pytest.importorskip("rejax")
    out = tmp_path / "ppo"
    assert main(["baseline", "ppo", "--game", "breakout", "--protocol", "gymnax", "--frames", "8192",
                 "--eval-every", "8192", "--curve-games", "2", "--games", "3", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    saved = json.loads((out / "result.json").read_text())
    assert printed == saved and (out / "params.msgpack").stat().st_size > 100_000  # two 256 x 2 MLPs' actor
    assert saved["env_frames"] == 8192 and [f for f, _ in saved["curve"]] == [8192]
    assert saved["protocol"]["max_episode_steps"] == 1000 and saved["trained_on"] == "gymnax"
    for key in ("final", "final_port"):
        f = saved[key]
        assert f["games"] == 3 and f["ci"][0] <= f["mean"] <= f["ci"][1] and 0 <= f["min"] <= f["max"]
    with pytest.raises(SystemExit) as err:
        main(["baseline", "ppo", "--game", "pong", "--out", str(tmp_path / "x")])
    assert err.value.code == 2 and not (tmp_path / "x").exists()
