"""The custom-game example (examples/custom_game: Catch) and ``--preset path.yaml``.

Catch is the worked example of docs/custom-game.md: a user's own host game that
registers itself on import and is trained from a preset file next to it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from moozi.config import ConfigError, config_from_dict
from moozi.envs import IllegalActionError, list_envs, make_env, unregister
from moozi.envs.pool import make_pool
from moozi.presets import load_preset, merge_sections

EXAMPLE_DIR = Path(__file__).resolve().parents[1] / "examples" / "custom_game"
NAME = "catch:v0"
LEFT, STAY, RIGHT = 0, 1, 2
ROWS, COLUMNS = 6, 5
EPISODE = ROWS - 1  # actions per episode


@pytest.fixture(scope="module", autouse=True)
def catch():
    """Import examples/custom_game/catch.py as the module ``catch`` (as env.modules does)."""
    added = str(EXAMPLE_DIR) not in sys.path
    if added:
        sys.path.insert(0, str(EXAMPLE_DIR))
    sys.modules.pop("catch", None)
    module = importlib.import_module("catch")
    yield module
    unregister(NAME)
    sys.modules.pop("catch", None)
    if added and str(EXAMPLE_DIR) in sys.path:
        sys.path.remove(str(EXAMPLE_DIR))


def _ball_and_paddle(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``obs [B, 6, 5, 2]`` -> ball row, ball column, paddle column, each ``[B]``."""
    b = obs.shape[0]
    ball = obs[..., 0].reshape(b, -1).argmax(-1)
    paddle = obs[:, -1, :, 1].argmax(-1)
    return ball // COLUMNS, ball % COLUMNS, paddle


def _follow(ts) -> np.ndarray:
    """Move the paddle toward the ball's column."""
    _, col, paddle = _ball_and_paddle(ts.observation)
    return (np.sign(col - paddle) + 1).astype(np.int32)


def _episodes(pool, policy, num_episodes: int, seed: int = 0):
    """Play ``num_episodes`` episodes per environment; returns a list of
    (starting ball column [B], final reward [B]) per episode, checking the step contract on the way."""
    b = pool.num_envs
    ts = pool.reset(seed)
    out = []
    for _ in range(num_episodes):
        assert ts.is_first.all() and not ts.is_last.any() and (ts.reward == 0).all()
        _, start_col, paddle = _ball_and_paddle(ts.observation)
        assert (paddle == COLUMNS // 2).all()
        for t in range(EPISODE):
            assert ts.legal_actions.shape == (b, 3) and ts.legal_actions[:, STAY].all()
            ts = pool.step(policy(ts))
            assert ts.observation.shape == (b, ROWS, COLUMNS, 2) and ts.observation.dtype == np.float32
            assert (ts.observation.sum(axis=(1, 2)) == 1).all()  # one ball, one paddle
            assert (ts.to_play == 0).all()
            last = t == EPISODE - 1
            assert (ts.is_last == last).all() and (ts.is_terminal == last).all() and not ts.is_first.any()
            if not last:
                assert (ts.reward == 0).all()
        assert not ts.legal_actions.any()  # nothing is legal on a last step
        out.append((start_col, ts.reward.copy()))
        ts = pool.step(np.full((b,), 7))  # the step after a last step resets and ignores the action
    return out


def test_import_registers_catch(catch):
    assert NAME in list_envs(path="host")
    env = make_env(NAME)
    assert isinstance(env, catch.CatchEnv)
    assert env.spec.observation_shape == (ROWS, COLUMNS, 2) and env.spec.num_actions == 3
    assert env.spec.num_players == 1 and env.spec.path == "host" and env.spec.name == NAME
    importlib.reload(catch)  # re-importing registers again without an error (overwrite=True)
    assert NAME in list_envs(path="host")


def test_env_kwargs_reach_the_game():
    env = make_env(NAME, rows=4, columns=7)
    assert env.spec.observation_shape == (4, 7, 2)
    with pytest.raises(ConfigError, match="unknown parameter 'width'"):
        make_env(NAME, width=3)


def test_following_the_ball_always_catches():
    with make_pool(NAME, 4, seed=0, modules=("catch",)) as pool:
        episodes = _episodes(pool, _follow, 4)
    rewards = np.stack([r for _, r in episodes])
    assert (rewards == 1.0).all()
    columns = np.concatenate([c for c, _ in episodes])
    assert len(set(columns.tolist())) > 2  # the ball starts in several columns


def test_staying_still_misses_unless_the_ball_is_above_the_paddle():
    stay = lambda ts: np.full((ts.observation.shape[0],), STAY)  # noqa: E731
    with make_pool(NAME, 4, seed=0, modules=("catch",)) as pool:
        episodes = _episodes(pool, stay, 5)
    columns = np.concatenate([c for c, _ in episodes])
    rewards = np.concatenate([r for _, r in episodes])
    np.testing.assert_array_equal(rewards, np.where(columns == COLUMNS // 2, 1.0, -1.0))
    far = (columns == 0) | (columns == COLUMNS - 1)
    assert far.any() and (rewards[far] == -1.0).all()


def test_seeded_resets_reproduce(catch):
    env = catch.CatchEnv()
    first = [env.reset(s).observation for s in range(20)]
    np.testing.assert_array_equal(first, [env.reset(s).observation for s in range(20)])
    assert len({int(o[0, :, 0].argmax()) for o in first}) > 1  # the seed picks the column

    def play(seed):
        with make_pool(NAME, 4, seed=seed, modules=("catch",)) as pool:
            ts = pool.reset()
            obs = [ts.observation]
            for _ in range(3 * (EPISODE + 1)):
                ts = pool.step(_follow(ts))
                obs.append(ts.observation)
            return np.stack(obs)

    np.testing.assert_array_equal(play(0), play(0))
    assert not np.array_equal(play(0), play(1))


def test_illegal_actions_raise():
    with make_pool(NAME, 2, seed=0, modules=("catch",)) as pool:
        pool.reset()
        with pytest.raises(IllegalActionError, match="out of range"):
            pool.step(np.array([3, STAY]))
        ts = pool.step(np.array([LEFT, STAY]))
        ts = pool.step(np.array([LEFT, STAY]))  # env 0's paddle is now at the left wall
        assert _ball_and_paddle(ts.observation)[2][0] == 0
        np.testing.assert_array_equal(ts.legal_actions[0], [False, True, True])
        with pytest.raises(IllegalActionError, match="not legal"):
            pool.step(np.array([LEFT, STAY]))
        pool.step(np.array([RIGHT, STAY]))  # the pool is unchanged by the rejected step


def test_render(catch):
    env = catch.CatchEnv()
    env.reset(0)
    picture = env.render()
    lines = picture.splitlines()
    assert len(lines) == ROWS and all(len(line) == COLUMNS for line in lines)
    assert lines[-1].count("=") + lines[-1].count("@") == 1


def test_modules_are_imported_in_worker_processes(monkeypatch):
    """env.modules: a worker process imports ``catch`` from the working directory."""
    monkeypatch.chdir(EXAMPLE_DIR)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(EXAMPLE_DIR)])
    with make_pool(NAME, 2, seed=0, num_workers=1, modules=("catch",)) as pool:
        episodes = _episodes(pool, _follow, 2)
    assert all((r == 1.0).all() for _, r in episodes)


def test_docs_contract_check_snippet_runs(monkeypatch):
    """The contract-check snippet of docs/custom-game.md (section 6) runs as written, from the example folder."""
    text = (EXAMPLE_DIR.parents[1] / "docs" / "custom-game.md").read_text()
    section = text.split("## 6. Check your game", 1)[1].split("## 7.", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(EXAMPLE_DIR)
    exec(compile(code, "docs/custom-game.md", "exec"), {})


# ----------------------------------------------------------------------------- the preset file


def test_preset_file_loads_and_validates(monkeypatch):
    data = load_preset(str(EXAMPLE_DIR / "catch.yaml"))
    config = config_from_dict(data)
    assert config.env.name == NAME and config.env.modules == ("catch",) and config.env.num_envs == 16
    assert config.model.kind == "mlp" and config.targets.history_length == 1
    monkeypatch.chdir(EXAMPLE_DIR)
    assert load_preset("catch.yaml") == data  # a relative path, as in `moozi train --preset catch.yaml`


def test_preset_file_errors(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="nope.yaml") as err:
        load_preset(str(missing))
    assert "does not exist" in str(err.value)
    with pytest.raises(ConfigError, match="sub/dir") as err:
        load_preset("sub/dir")  # a path separator means a file, even without .yaml
    with pytest.raises(ConfigError, match="available presets are .*cartpole.*\\.yaml"):
        load_preset("no_such_preset")
    bad = tmp_path / "bad.yml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_preset(str(bad))


def test_merge_sections_golden():
    base = {"model": {"kind": "resnet", "channels": 16}, "planner": {"kind": "gumbel"}, "tags": [1, 2]}
    over = {"model": {"channels": 32}, "tags": [3], "learner": {"learning_rate": 0.1}}
    assert merge_sections(base, over) == {
        "model": {"kind": "resnet", "channels": 32}, "planner": {"kind": "gumbel"}, "tags": [3],
        "learner": {"learning_rate": 0.1},
    }
    assert base["model"] == {"kind": "resnet", "channels": 16}  # not changed in place


def test_preset_base_packaged_and_relative_and_loops(tmp_path):
    # A packaged variant lists only what it changes; the rest comes from its base.
    az = load_preset("freeway-az")
    assert "base" not in az and az["model"]["dynamics"] == "simulator" and az["replay"]["beta"] == 0.0
    own = ("dynamics", "dynamics_action")
    assert {k: v for k, v in az["model"].items() if k not in own} == {
        k: v for k, v in load_preset("freeway")["model"].items() if k not in own}
    # A user file on top of a packaged preset, and a file on top of a file next to it.
    (tmp_path / "mine.yaml").write_text("base: cartpole\nlearner:\n  learning_rate: 0.5\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "more.yaml").write_text("base: ../mine.yaml\nschedule:\n  batch_size: 8\n")
    data = load_preset(str(sub / "more.yaml"))
    cartpole = load_preset("cartpole")
    assert data["learner"]["learning_rate"] == 0.5 and data["schedule"]["batch_size"] == 8
    assert data["env"] == cartpole["env"]
    assert config_from_dict(data).learner.learning_rate == 0.5
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match="loop: .*a.yaml -> .*b.yaml -> .*a.yaml"):
        load_preset(str(tmp_path / "a.yaml"))
    (tmp_path / "c.yaml").write_text("base: 3\n")
    with pytest.raises(ConfigError, match="base must be"):
        load_preset(str(tmp_path / "c.yaml"))
    (tmp_path / "d.yaml").write_text("base: no_such_preset\n")
    with pytest.raises(ConfigError, match="available presets"):
        load_preset(str(tmp_path / "d.yaml"))


# ----------------------------------------------------------------------------- training through the CLI


TINY = [
    "env.num_envs=4",
    "acting.steps_per_epoch=4",
    "schedule.batch_size=8",
    "schedule.samples_per_env_step=2",
    "schedule.min_replay_steps=1",
    "testing.every=2",
    "testing.episodes=2",
    "testing.envs=2",
    "testing.steps_per_segment=6",
    "schedule.max_env_steps=64",
    "planner.num_simulations=2",
    "test_planner.num_simulations=2",
    "model.head_hidden=8",
    "model.mlp_hidden=[8]",
    "model.mlp_embedding=8",
    "replay.capacity=2000",
]


def test_train_and_eval_catch_from_its_folder(tmp_path):
    """The documented commands, from examples/custom_game: train from catch.yaml, then eval the run."""
    run = tmp_path / "run"
    cli = [sys.executable, "-m", "moozi.cli"]
    # --minutes is only a safety net here: schedule.max_env_steps ends the run.
    train = subprocess.run(
        [*cli, "train", "--preset", "catch.yaml", "--run-dir", str(run), "--minutes", "5", *TINY],
        cwd=EXAMPLE_DIR, capture_output=True, text=True, timeout=900,
    )
    assert train.returncode == 0, train.stderr[-4000:]
    summary = json.loads(train.stdout.strip().splitlines()[-1])
    assert summary["env_steps"] == 64 and summary["updates"] > 0
    assert "test/return_mean" in summary and -1.0 <= summary["test/return_mean"] <= 1.0
    assert config_from_dict(yaml.safe_load((run / "config.yaml").read_text())).env.modules == ("catch",)
    ev = subprocess.run(
        [*cli, "eval", str(run), "--opponent", "random", "--games", "4"],
        cwd=EXAMPLE_DIR, capture_output=True, text=True, timeout=600,
    )
    assert ev.returncode == 0, ev.stderr[-4000:]
    result = json.loads(ev.stdout.strip().splitlines()[-1])
    assert result["env"] == NAME and result["games"] == 4


def _walks(run_dir: Path, games: int = 64) -> list[tuple[list[int], bool]]:
    """Greedy test games of a trained Corridor run: (the moves, ended at the goal) of each."""
    from moozi.eval.evaluate import play

    _, _, episodes, _ = play(run_dir, games=games, seed=1)
    out = []
    for e in episodes:
        t = e.trajectory
        moves = np.asarray(t.actions)[int(t.first):int(t.last)].tolist()  # the last step has the dummy action
        out.append((moves, bool(t.is_terminal)))
    return out


@pytest.mark.extended
def test_corridor_learns_the_shortest_path(tmp_path, monkeypatch):
    """docs/custom-game.md §5 in practice: a delayed reward and episodes of varying length learn with the
    guide's settings (discount < 1, identity transform on [-1, 1], td_steps past the cap): after training,
    every greedy test game walks straight to the goal."""
    run = tmp_path / "corridor"
    train = subprocess.run(
        [sys.executable, "-m", "moozi.cli", "train", "--preset", "corridor.yaml", "--run-dir", str(run),
         "--minutes", "10", "schedule.max_env_steps=16000"],
        cwd=EXAMPLE_DIR, capture_output=True, text=True, timeout=900,
    )
    assert train.returncode == 0, train.stderr[-4000:]
    assert "health:" not in train.stderr and "outside what" not in train.stderr, train.stderr[-2000:]
    monkeypatch.chdir(EXAMPLE_DIR)
    try:
        walks = _walks(run)
    finally:
        unregister("corridor:v0")
        sys.modules.pop("corridor", None)
    # A walk that reaches the goal without ever turning back is the shortest one (the goal is at an end).
    assert all(done and len(set(moves)) == 1 for moves, done in walks), walks
