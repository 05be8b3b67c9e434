"""The diagnosis scripts of research/ (model_foresight, offline_fit, value_vs_solver): their measures on stub
models with hand-computed answers, and each run on a tiny run folder."""

import pytest

from moozi.cli import main
from research.tests.helpers import load_script
from tests.helpers import TINY


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("diag") / "cartpole"
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), *TINY, "schedule.max_env_steps=160",
                 "output.checkpoint_every_minutes=0.0001", "output.log_every_epochs=1"]) == 0
    return run


def test_model_foresight_golden():
    """research/model_foresight.py's measures on a stub model with hand-computed answers: two states, two
    moves; the model scores move 1 (reward 1) above move 2 (value 0.5, gamma 0.9: 0.45); its value of a real
    frame is 2 when the frame is lit, 0 when dark (the real ranking: reward + 0.9 v, and 0 after a move that ends the game)."""
    from types import SimpleNamespace

    import jax.numpy as jnp
    import numpy as np

    class Stub:
        num_actions = 3  # augmented: the dummy and two moves

        def initial_inference(self, params, obs):  # obs [B, 1, 1, 4]: channel 0 is the newest frame
            return SimpleNamespace(value=2.0 * obs[:, 0, 0, 0], hidden=obs)

        def recurrent_inference(self, params, hidden, action):
            lit = jnp.broadcast_to((action == 1)[:, None, None, None] * 1.0, hidden.shape)
            return SimpleNamespace(reward=(action == 1) * 1.0, value=(action == 2) * 0.5, hidden=lit)

    history = (jnp.zeros((2, 1, 1, 1, 1)), jnp.zeros((2, 1), jnp.int32))
    probe = {"histories": [history], "fatal": np.array([[False, True], [True, False]]),
             "terminal": np.array([[False, True], [False, False]]),
             "reward": np.array([[1.0, 0.0], [0.0, 0.0]]), "valid": np.array([True, True]),
             # the real next frames: state 0 dark after move 1, lit after move 2 (which ends the game);
             # state 1 lit after both
             "next_observations": [np.array([[0, 1], [1, 1]], np.uint8).reshape(2, 2, 1, 1, 1)]}
    fs = load_script("model_foresight")
    out = fs.foresight(Stub(), None, probe, discount=0.9)
    # state 0: safe move 1 (1.0) above fatal move 2 (0.45): right; state 1: safe move 2 below fatal move 1: wrong
    assert out["p_safe_above_fatal"] == 0.5 and out["states_with_safe_and_fatal"] == 2
    # Real: state 0, safe move 1 (1 + 0.9 * 0 = 1) above fatal move 2 (lit, but the game ended: 0): right, and
    # wrong (1.8 above 1) were the end ignored; state 1, both lit with no reward (1.8 each): a tie, half.
    assert out["p_safe_above_fatal_real"] == 0.75
    # Safe minus fatal q: through the dynamics state 0 1.0 - 0.45, state 1 0.45 - 1.0 (mean 0); real 1 - 0 and
    # 1.8 - 1.8 (mean 0.5). What each move adds (state means out): dynamics (0.275, -0.275) in both states,
    # real (0.5, -0.5) and (0, 0): correlation 0.275 / (0.55 * sqrt(0.5)) = 1 / sqrt(2).
    assert out["q_gap"] == 0.0 and out["q_gap_real"] == 0.5 and out["action_corr"] == 0.707
    assert out["reward_on_rewarded"] == 1.0 and out["reward_on_others"] == round(1 / 3, 4)
    assert out["value_sd"] == 0.0 and out["rewarded_moves"] == 1


def test_replay_setback_golden():
    """model_foresight.replay_setback on a stub model with hand-computed answers: four replay transitions,
    two moves, gamma 1. The dynamics values move 1 by the state's channel 1 and move 2 at 0.5 (no reward);
    a state's value is its channel 0. Margins of the best other move over the move taken: hit 0 (took 1,
    0.2): 0.3; safe 1 (took 1, 0.9): -0.4; safe 2 (took 2, move 1 0.7): 0.2; hit 3 (took 1, 0.6): -0.1. Hits
    above safe in 3 of 4 pairs: AUC 0.75. Real drops (value minus the real next frame's): hits 1 and 0.8,
    safe 0 and 0: AUC 1."""
    from types import SimpleNamespace

    import jax.numpy as jnp
    import numpy as np

    class Stub:
        num_actions = 3  # augmented: the dummy and two moves

        def initial_inference(self, params, obs):
            return SimpleNamespace(value=obs[:, 0, 0, 0], hidden=obs)

        def recurrent_inference(self, params, hidden, action):
            value = jnp.where(action == 1, hidden[:, 0, 0, 1], 0.5)
            return SimpleNamespace(reward=jnp.zeros_like(value), value=value, hidden=hidden)

    state = np.array([[1.0, 0.2], [1.0, 0.9], [0.5, 0.7], [1.0, 0.6]], np.float32).reshape(4, 1, 1, 2)
    nxt = np.array([[0.0, 0], [1.0, 0], [0.5, 0], [0.2, 0]], np.float32).reshape(4, 1, 1, 2)
    transitions = {"observation": state, "next_observation": nxt, "action": np.array([1, 1, 2, 1], np.int32),
                   "reward": np.zeros(4, np.float32), "hit": np.array([True, False, False, True])}
    out = load_script("model_foresight").replay_setback(Stub(), None, transitions, discount=1.0)
    assert out == {"replay_transitions": 4, "replay_setbacks": 2, "replay_auc": 0.75, "replay_auc_real": 1.0}


def test_freeway_setback_golden():
    """A car that sends the chicken back to the bottom is Freeway's fatal move; a step down onto the bottom
    row, or scoring (which also puts the chicken on the bottom), is not."""
    import numpy as np

    def frame(row):
        f = np.zeros((10, 10, 7), np.float32)
        f[row, 4, 0] = 1
        return f

    before = np.stack([frame(5), frame(8), frame(0), frame(5)])
    after = np.stack([frame(9), frame(9), frame(9), frame(4)])
    reward = np.array([0.0, 0.0, 1.0, 0.0])
    setback = load_script("model_foresight").freeway_setback(before, after, reward)
    assert setback.tolist() == [True, False, False, False]


def test_boost_setbacks_golden():
    """offline_fit's --boost-setbacks multiplies the priority of the positions whose next step is Freeway's
    setback: one stored episode of four steps with the chicken on rows 5, 9, 8, 9 and no reward; only 0 -> 1
    is a car's hit (8 -> 9 is a step down onto the bottom row; step 3 has no next step)."""
    from types import SimpleNamespace

    import numpy as np
    import pytest

    frames = np.zeros((4, 10, 10, 7), np.uint8)
    for slot, row in enumerate([5, 9, 8, 9]):
        frames[slot, row, 4, 0] = 1
    replay = SimpleNamespace(config=SimpleNamespace(capacity=4), _sampleable=np.array([True, True, True, False]),
                             _slot_traj=np.zeros(4, np.int64), _traj_start=np.zeros(1, np.int64),
                             _traj_len=np.array([4]), _frames=frames, _rewards=np.zeros(4, np.float32),
                             _priority=np.array([1.0, 2.0, 3.0, 0.0]))
    replay._set_priorities = lambda slots, prio: replay._priority.__setitem__(slots, prio)
    fit = load_script("offline_fit")
    assert fit.boost_setbacks(replay, "gymnax:Freeway-MinAtar", 10.0) == 1
    assert replay._priority.tolist() == [10.0, 2.0, 3.0, 0.0]
    with pytest.raises(SystemExit, match="no setback"):
        fit.boost_setbacks(replay, "gymnax:Breakout-MinAtar", 10.0)


def test_model_foresight_and_offline_fit_read_a_single_player_run(kept_run):
    read = load_script("model_foresight").read_run(str(kept_run), steps=3)
    assert read["states"] > 0 and read["updates"] >= 1 and read["value_sd"] >= 0
    fitted = load_script("offline_fit").fit(kept_run, updates=2, reports=1, overrides=["learner.value_coef=0.5"],
                                       beta=0.0, foresight=True, update_priorities=True)
    assert fitted["beta"] == 0.0 and set(fitted["rows"][-1]["foresight"]) >= {"p_safe_above_fatal", "p_safe_above_fatal_real",
                                                                             "value_sd", "q_gap", "action_corr"}
    assert fitted["update_priorities"] is True
    # beta 0: every importance weight is 1, so a batch is worth all of its samples
    assert fitted["effective_batch"]["median"] == fitted["batch_size"]


def test_the_connect_four_diagnosis_scripts_read_a_run(tmp_path):
    """The two diagnosis scripts of docs/results/connect4-alphazero-fix run on a tiny connect four run."""
    run = tmp_path / "c4"
    assert main(["train", "--preset", "connect4", "--run-dir", str(run), *TINY, "schedule.max_env_steps=80"]) == 0
    read = load_script("value_vs_solver").read_network(str(run), per_category=1)
    assert read["positions"] == 6 and set(read["value_by_result"]) <= {"win", "draw", "loss"}
    assert sum(v["positions"] for v in read["value_by_result"].values()) == 6 and "all" in read["prior_mistakes"]
    fitted = load_script("offline_fit").fit(run, updates=2, reports=1, overrides=["learner.l2_coef=0"])
    assert [r["updates"] for r in fitted["rows"]] == [2] and fitted["rows"][0]["loss/l2"] == 0.0
    assert fitted["replay_steps"] > 0 and 0.0 <= fitted["start_targets"].get("mean_peak", 0.0) <= 1.0


def test_baselines_2048_play_whole_games():
    """The yardsticks play to the end: scores are sums of merges (multiples of 4), best tiles powers of two, and
    the greedy player (the best merge now) outscores the random one over the same games."""
    from research.baselines_2048 import main

    rand = main(["--player", "random", "--games", "16", "--seed", "3"])
    greedy = main(["--player", "greedy", "--games", "16", "--seed", "3"])
    for out in (rand, greedy):
        assert out["score_min"] % 4 == 0 and out["moves_mean"] > 50
        assert all(int(t) & (int(t) - 1) == 0 and int(t) >= 16 for t in out["best_tile"])
        assert sum(out["best_tile"].values()) == 16
    assert greedy["score_mean"] > rand["score_mean"]
    for bad in (["--player", "greedy", "--simulations", "8"], ["--player", "run", "--run", "r", "--simulations", "0"]):
        with pytest.raises(SystemExit):  # --simulations N (N >= 1) is the run player's only
            main(bad)
