"""The OpenSpiel bridge (host path) behind the step contract, and the host perfect tic-tac-toe player.

Cross-checked against ``pgx:tic_tac_toe`` (device path): the same move
sequences give the same rewards (mover's view), the same last step and the
same legal masks and boards at every step.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel")

from moozi.config import ConfigError  # noqa: E402
from moozi.envs import list_envs, make_env  # noqa: E402
from moozi.envs.contract import IllegalActionError, TimeStep, UnknownEnvError  # noqa: E402
from moozi.envs.openspiel_bridge import GAMES, OpenSpielEnv  # noqa: E402
from moozi.envs.pool import make_pool  # noqa: E402
from moozi.eval.perfect import cells_from_observation, cells_from_openspiel, host_perfect_opponent  # noqa: E402

TTT = "openspiel:tic_tac_toe"

# Tic-tac-toe games (cell indices, row-major; x = player 0 moves first) -> (winner by move order, length).
X_WINS = [4, 0, 1, 3, 7]  # x: 4 1 7 (middle column) on move 5
O_WINS = [0, 4, 1, 2, 3, 6]  # o: 4 2 6 (anti-diagonal) on move 6
DRAW = [0, 1, 2, 4, 3, 5, 7, 6, 8]  # full board, no line: ends at move 9 = max_game_length
SEQUENCES = {
    "x_wins": (X_WINS, +1),
    "o_wins": (O_WINS, -1),
    "draw": (DRAW, 0),
    "x_wins_diag": ([0, 1, 4, 2, 8], +1),  # x: 0 4 8
    "o_wins_row": ([0, 3, 1, 4, 8, 5], -1),  # o: 3 4 5
    "x_wins_last_move": ([6, 4, 7, 0, 1, 2, 5, 3, 8], +1),  # x: 6 7 8 on move 9 (= max_game_length)
}


def ts_at(ts: TimeStep, b: int) -> dict:
    return {k: np.asarray(getattr(ts, k))[b] for k in TimeStep.__dataclass_fields__}


def play(name: str, moves: list[int], **kwargs) -> list[dict]:
    """Time steps (unbatched dicts) of one game played through a one-env pool: reset + one per move."""
    with make_pool(name, 1, **kwargs) as pool:
        out = [ts_at(pool.reset(), 0)]
        for a in moves:
            out.append(ts_at(pool.step(np.array([a])), 0))
    return out


def winner_by_rules(moves: list[int]) -> int:
    """+1 if the first mover (x) completed a line, -1 if the second mover did, 0 otherwise; checks no earlier end."""
    lines = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
    board = [0] * 9
    for i, a in enumerate(moves):
        assert board[a] == 0
        board[a] = 1 if i % 2 == 0 else -1
        won = any(board[p] == board[q] == board[r] != 0 for p, q, r in lines)
        if won or i == 8:
            assert i == len(moves) - 1, f"{moves} ends at move {i + 1}"
            return board[a] if won else 0
    raise AssertionError(f"{moves} does not end")


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_sequences_are_what_they_claim(name):
    moves, winner = SEQUENCES[name]
    assert winner_by_rules(moves) == winner


# ----------------------------------------------------------------------------- specs


@pytest.mark.parametrize(
    "name, shape, actions, cap",
    [
        # The game's own planes plus the to_play plane of two-player games.
        ("openspiel:tic_tac_toe", (3, 3, 4), 9, 9),
        ("openspiel:connect_four", (6, 7, 4), 7, 42),
        ("openspiel:breakthrough(rows=5,columns=5)", (5, 5, 4), 300, 71),
        ("openspiel:go(board_size=9)", (9, 9, 5), 82, 162),
    ],
)
def test_spec_shapes(name, shape, actions, cap):
    env = make_env(name)
    assert isinstance(env, OpenSpielEnv)
    s = env.spec
    assert (s.name, s.observation_shape, s.num_actions, s.num_players, s.max_episode_steps, s.path) == (
        name, shape, actions, 2, cap, "host")
    g = env.reset(0)
    assert np.asarray(g.observation).shape == shape and g.to_play == 0
    assert np.asarray(g.legal_actions).shape == (actions,) and np.asarray(g.legal_actions).any()


def test_registry_lists_and_params_merge():
    assert {f"openspiel:{g}" for g in GAMES} <= set(list_envs(path="host"))
    assert not any(n.startswith("openspiel:") for n in list_envs(path="device"))
    assert make_env("openspiel:go", params={"board_size": 9}).spec.observation_shape == (9, 9, 5)
    env = make_env("openspiel:breakthrough(rows=5)", params={"columns": 6})
    assert env.spec.observation_shape == (5, 6, 4)
    assert "rows=5" in env.spec.name and "columns=6" in env.spec.name
    # the dict wins over the string; an int for a float parameter is accepted
    assert make_env("openspiel:go(board_size=19)", params={"board_size": 9, "komi": 6}).spec.num_actions == 82
    assert make_env(TTT, max_episode_steps=5).spec.max_episode_steps == 5


def test_single_player_game():
    s = make_env("openspiel:cliff_walking").spec
    assert (s.observation_shape, s.num_actions, s.num_players) == ((4, 8, 1), 4, 1)
    steps = play("openspiel:cliff_walking", [1, 3])  # a step costs -1
    assert [t["reward"] for t in steps] == [0.0, -1.0, -1.0]
    assert all(t["to_play"] == 0 for t in steps) and not steps[-1]["is_last"]
    steps = play("openspiel:cliff_walking", [0])  # from the start, action 0 walks into the cliff
    assert steps[-1]["reward"] == -100.0 and steps[-1]["is_terminal"]


# ----------------------------------------------------------------------------- tic-tac-toe games


def empty_cells(moves: list[int]) -> np.ndarray:
    legal = np.ones(9, bool)
    legal[moves] = False
    return legal


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_tic_tac_toe_game(name):
    moves, winner = SEQUENCES[name]
    steps = play(TTT, moves)
    first = steps[0]
    assert first["is_first"] and first["reward"] == 0 and first["to_play"] == 0 and first["legal_actions"].all()
    for t, ts in enumerate(steps):
        last = t == len(moves)
        assert ts["is_last"] == last and ts["is_terminal"] == last and ts["is_first"] == (t == 0)
        assert ts["to_play"] == t % 2  # alternates; at the end, the player who would move next
        assert ts["observation"].shape == (3, 3, 4) and ts["observation"].dtype == np.float32
        assert np.all(ts["observation"][..., 3] == ts["to_play"])
        if last:
            assert not ts["legal_actions"].any()
            mover_won = winner != 0  # the last mover completed the line, or nobody did
            assert ts["reward"] == (1.0 if mover_won else 0.0)
        else:
            assert ts["reward"] == 0.0
            np.testing.assert_array_equal(ts["legal_actions"], empty_cells(moves[:t]))


def test_draw_at_max_game_length_is_terminated_not_truncated():
    with make_pool(TTT, 1) as pool:
        pool.reset()
        for a in DRAW:
            ts = pool.step(np.array([a]))
        assert pool.episode_step[0] == 9 == pool.spec.max_episode_steps
    assert ts.is_last[0] and ts.is_terminal[0] and not ts.is_truncated[0] and ts.reward[0] == 0


def test_lower_cap_truncates_and_auto_reset():
    steps = play(TTT, [0, 1, 2, 5], max_episode_steps=3)
    assert steps[3]["is_last"] and not steps[3]["is_terminal"]
    assert steps[4]["is_first"] and steps[4]["legal_actions"].all()  # next step: a new episode, action ignored


def test_illegal_moves_raise():
    with make_pool(TTT, 2) as pool:
        pool.reset()
        pool.step(np.array([4, 0]))
        with pytest.raises(IllegalActionError, match="action 4 is not legal"):
            pool.step(np.array([4, 1]))
        with pytest.raises(IllegalActionError, match="out of range"):
            pool.step(np.array([9, 1]))
        ts = pool.step(np.array([0, 1]))  # still usable after a refused step
        assert ts.legal_actions.sum() == 14


def test_render_and_workers():
    env = make_env(TTT)
    env.reset(0)
    env.step(4)
    assert env.render() == "...\n.x.\n..."
    with make_pool(TTT, 2, num_workers=1) as pool:  # picklable factory (spawned worker)
        pool.reset()
        ts = pool.step(np.array([4, 4]))
        assert pool.call("render") == ["...\n.x.\n..."] * 2 and (ts.to_play == 1).all()


def test_two_moves_in_a_row_warn(monkeypatch):
    import moozi.envs.pool as pool_module

    monkeypatch.setattr(pool_module, "_warned_turns", False)
    rng = np.random.default_rng(0)
    with make_pool("openspiel:mancala", 1) as pool, pytest.warns(RuntimeWarning, match="moved twice in a row"):
        ts = pool.reset()
        for _ in range(200):
            legal = ts.legal_actions[0]
            ts = pool.step(np.array([rng.choice(np.flatnonzero(legal)) if legal.any() else 0]))


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "game, why",
    [
        ("kuhn_poker", r"imperfect information"),
        ("goofspiel", r"simultaneous moves"),
        ("chinese_checkers(players=3)", r"more than 2 players \(3\)"),
        ("morpion_solitaire", r"no observation tensor"),
    ],
)
def test_unsupported_games_are_refused(game, why):
    with pytest.raises(ConfigError, match=rf"openspiel:{game.split('(')[0]}.*not supported.*{why}.*Supported"):
        make_env(f"openspiel:{game}")


def test_unknown_game_and_bad_parameters():
    with pytest.raises(UnknownEnvError, match=r"unknown OpenSpiel game 'tic_tac_tow'.*did you mean tic_tac_toe") as e:
        make_env("openspiel:tic_tac_tow")
    assert "openspiel:connect_four" in str(e.value) and "pyspiel.registered_names()" in str(e.value)
    with pytest.raises(ConfigError, match=r"unknown parameter 'foo'.*allowed: columns, rows"):
        make_env("openspiel:breakthrough(foo=1)")
    with pytest.raises(ConfigError, match=r"unknown parameter 'size'.*board_size"):
        make_env("openspiel:go", params={"size": 9})
    with pytest.raises(ConfigError, match=r"parameter rows = 'x' is invalid: allowed an integer"):
        make_env("openspiel:breakthrough(rows=x)")
    with pytest.raises(ConfigError, match=r"parameter board_size = 9.5 is invalid"):
        make_env("openspiel:go", params={"board_size": 9.5})
    with pytest.raises(ConfigError, match=r"cannot parse"):
        make_env("openspiel:go(board_size=9")
    with pytest.raises(ConfigError, match=r"unknown parameter 'depth'.*allowed: params, max_episode_steps"):
        make_env(TTT, depth=3)
    with pytest.raises(ConfigError, match=r"max_episode_steps = 0 is invalid"):
        make_env(TTT, max_episode_steps=0)
    with pytest.raises(ConfigError, match=r"params = .* is invalid"):
        make_env(TTT, params=[("a", 1)])


def test_missing_pyspiel_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspiel", None)  # import pyspiel -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'moozi\[openspiel\]'"):
        make_env(TTT)


def test_import_is_light():
    code = (
        "import sys, moozi.envs as e; names = e.list_envs(); "
        "assert 'pyspiel' not in sys.modules, 'heavy import'; assert 'openspiel:tic_tac_toe' in names"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- cross-check with pgx


def test_same_games_as_pgx_tic_tac_toe():
    pytest.importorskip("pgx")
    names = sorted(SEQUENCES)
    seqs = [SEQUENCES[n][0] for n in names]
    B = len(seqs)
    with make_pool("pgx:tic_tac_toe", B, seed=3) as dev, make_pool(TTT, B) as host:
        tp, to = dev.reset(), host.reset()
        first_p = tp.to_play.copy()  # pgx draws which player id moves first: compare by move order
        assert set(first_p.tolist()) == {0, 1}  # this seed covers both
        assert (to.to_play == 0).all()
        for t in range(max(len(s) for s in seqs) + 1):
            for b, seq in enumerate(seqs):
                if t > len(seq):
                    continue
                msg = f"{names[b]} step {t}"
                assert tp.reward[b] == to.reward[b], msg
                assert (tp.is_last[b], tp.is_terminal[b], tp.is_first[b]) == (
                    to.is_last[b], to.is_terminal[b], to.is_first[b]), msg
                assert tp.is_last[b] == (t == len(seq)), msg
                np.testing.assert_array_equal(tp.legal_actions[b], to.legal_actions[b], err_msg=msg)
                # the same player by move order (first mover or not), terminal steps included
                assert (tp.to_play[b] == first_p[b]) == (to.to_play[b] == 0), msg
                # the same board from the player to move's point of view
                np.testing.assert_array_equal(
                    np.asarray(cells_from_observation(tp.observation[b])),
                    cells_from_openspiel(to.observation[b], to.to_play[b]), err_msg=msg)

            # past the end: any legal move of the next episode (the step after the last ignores its action)
            def actions(ts):
                return np.array([s[t] if t < len(s) else np.argmax(ts.legal_actions[b]) for b, s in enumerate(seqs)])

            tp, to = dev.step(actions(tp)), host.step(actions(to))


# ----------------------------------------------------------------------------- host perfect opponent


def test_cells_from_openspiel_planes():
    env = make_env(TTT)
    env.reset(0)
    env.step(4)  # x (player 0) in the centre
    g = env.step(0)  # o (player 1) in the corner; x to move
    obs = np.asarray(g.observation)
    assert obs[1, 1, 2] == 1 and obs[0, 0, 1] == 1 and obs[..., 0].sum() == 7  # planes: empty, o, x
    cells = cells_from_openspiel(obs, g.to_play)
    assert g.to_play == 0 and cells[4] == 1 and cells[0] == -1 and np.abs(cells).sum() == 2
    np.testing.assert_array_equal(cells_from_openspiel(obs, 1), -cells)  # o's point of view
    batched = cells_from_openspiel(np.stack([obs, obs]), np.array([0, 1]))
    np.testing.assert_array_equal(batched, np.stack([cells, -cells]))


def _timestep(env_steps) -> TimeStep:
    return TimeStep(
        observation=np.stack([np.asarray(g.observation, np.float32) for g in env_steps]),
        reward=np.zeros(len(env_steps), np.float32),
        is_first=np.zeros(len(env_steps), bool),
        is_last=np.zeros(len(env_steps), bool),
        is_terminal=np.zeros(len(env_steps), bool),
        legal_actions=np.stack([np.asarray(g.legal_actions, bool) for g in env_steps]),
        to_play=np.array([g.to_play for g in env_steps], np.int32),
    )


def test_host_perfect_opponent_wins_and_blocks():
    positions = []
    for moves in ([0, 3, 1, 4], [0, 4, 1]):  # x to win at 2 (not block at 5); o to block at 2
        env = make_env(TTT)
        g = env.reset(0)
        for a in moves:
            g = env.step(a)
        positions.append(g)
    ts = _timestep(positions)
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = host_perfect_opponent(rng, ts)
        assert a.dtype == np.int32 and a.tolist() == [2, 2]
    nothing = _timestep(positions)
    nothing = nothing.replace(legal_actions=np.zeros_like(nothing.legal_actions))
    assert host_perfect_opponent(rng, nothing).tolist() == [0, 0]


def test_host_perfect_opponent_never_loses_to_random():
    B = 8
    seat = np.arange(B) % 2  # the perfect player is x in even environments, o in odd ones
    rng = np.random.default_rng(0)
    results = []
    with make_pool(TTT, B) as pool:
        ts = pool.reset()
        while len(results) < 3 * B:
            perfect = host_perfect_opponent(rng, ts)
            legal = ts.legal_actions
            rand = np.where(legal.any(-1), np.argmax(np.where(legal, rng.random(legal.shape), -1), -1), 0)
            ts = pool.step(np.where(ts.to_play == seat, perfect, rand))
            for b in np.flatnonzero(ts.is_last):
                mover = 1 - ts.to_play[b]
                results.append(ts.reward[b] if mover == seat[b] else -ts.reward[b])
    results = np.array(results)
    assert (results >= 0).all(), results
    assert (results > 0).sum() >= len(results) // 2  # random play loses most games to perfect play


# ----------------------------------------------------------------------------- chance nodes


def _random_episode(name: str, seed: int, policy_seed: int = 0):
    """(observations, rewards, to_play, the final pyspiel state) of one episode with random legal moves."""
    env = make_env(name)
    rng = np.random.default_rng(policy_seed)
    g = env.reset(seed)
    obs, rewards, players = [g.observation], [], [g.to_play]
    while not g.terminated:
        g = env.step(int(rng.choice(np.flatnonzero(g.legal_actions))))
        obs.append(g.observation)
        rewards.append(g.reward)
        players.append(g.to_play)
    return np.stack(obs), np.asarray(rewards), players, env.state


@pytest.mark.parametrize("game", ["2048", "einstein_wurfelt_nicht", "pig"])
def test_chance_nodes_are_sampled_from_the_reset_seed(game):
    """A game with chance nodes is accepted: the bridge samples them, so every step is a player's; an episode
    is the same again from the same seed and differs from another seed's; its rewards add up to its returns."""
    name = f"openspiel:{game}"
    obs, rewards, players, state = _random_episode(name, seed=7)
    again = _random_episode(name, seed=7)
    np.testing.assert_array_equal(obs, again[0])
    np.testing.assert_array_equal(rewards, again[1])
    other = _random_episode(name, seed=8)
    assert obs.shape != other[0].shape or not np.array_equal(obs, other[0])
    assert state.is_terminal() and all(p in (0, 1) for p in players)
    if game == "2048":  # intermediate rewards: the merges, summed over a move and the tile that follows it
        assert rewards.sum() == state.returns()[0] > 0
    else:  # two players, zero-sum: the last mover's outcome
        assert rewards[-1] in (-1.0, 1.0) and not rewards[:-1].any()


def test_einstein_wurfelt_nicht_shows_the_mover_its_die():
    """OpenSpiel's observation of Einstein wurfelt nicht! leaves out the die, which decides the pieces that may
    move; the bridge adds it as six one-hot channels before the to-play plane: at every decision the channel of
    the last chance outcome drawn (history()[-1], the die face - 1), and zeros on the terminal step."""
    env = make_env("openspiel:einstein_wurfelt_nicht")
    assert env.spec.observation_shape == (1, 1, 300 + 6 + 1)
    rng = np.random.default_rng(0)
    g, seen = env.reset(11), set()
    while True:
        die = g.observation.reshape(-1)[300:306]
        if g.terminated:
            assert not die.any()
            break
        assert die.sum() == 1 and int(die.argmax()) == env.state.history()[-1]
        seen.add(int(die.argmax()))
        g = env.step(int(rng.choice(np.flatnonzero(g.legal_actions))))
    assert len(seen) >= 3  # several faces over one game
