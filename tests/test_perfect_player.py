"""Exact tic-tac-toe solver and the perfect opponent for ``pgx:tic_tac_toe``."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.envs import make_env
from moozi.envs.device import reset_batch, step_batch
from moozi.eval import make_opponent, optimal_moves_from_cells, perfect_opponent, solve, value_of
from moozi.eval.perfect import LINES, cells_from_observation, cells_from_pgx, encode


def board(s: str) -> np.ndarray:
    """``"XX.OO...."`` -> cells, X = the player to move (+1), O = the opponent (-1)."""
    s = s.replace(" ", "").replace("/", "")
    assert len(s) == 9
    return np.array([{"X": 1, "O": -1, ".": 0}[c] for c in s], np.int32)


def moves(cells) -> list[int]:
    return np.flatnonzero(np.asarray(optimal_moves_from_cells(cells))).tolist()


# --- golden positions ---------------------------------------------------------------


def test_empty_board_is_a_draw():
    empty = board(".........")
    assert int(value_of(empty)) == 0
    assert moves(empty) == list(range(9))  # every first move draws


def test_one_move_win_returns_only_that_move():
    # Mover wins at 2; blocking at 5 would also win later (slower), so only 2 is optimal.
    b = board("XX. OO. ...")
    assert int(value_of(b)) == 1
    assert moves(b) == [2]


def test_must_block():
    b = board("OO. .X. ...")
    assert int(value_of(b)) == 0
    assert moves(b) == [2]


def test_lost_position_two_threats():
    # The opponent threatens 2 (row) and 6 (column); the mover cannot win at once.
    b = board("OO. OX. ..X")
    assert int(value_of(b)) == -1
    # Every move loses on the opponent's next move, so all of them are equally slow.
    assert moves(b) == [2, 5, 6, 7]


def test_batched_and_jitted():
    b = np.stack([board("XX. OO. ..."), board("OO. .X. ..."), board("OO. OX. ..X"), board(".........")])
    np.testing.assert_array_equal(np.asarray(jax.jit(value_of)(b)), [1, 0, -1, 0])
    opt = np.asarray(jax.jit(optimal_moves_from_cells)(b))
    assert opt.shape == (4, 9)
    assert opt[0].tolist() == [i == 2 for i in range(9)]


# --- the whole table against an independent minimax ---------------------------------


def _winner(cells: tuple[int, ...]) -> int:
    for a, b, c in LINES.tolist():
        if cells[a] != 0 and cells[a] == cells[b] == cells[c]:
            return cells[a]
    return 0


@functools.lru_cache(maxsize=None)
def _negamax(cells: tuple[int, ...]) -> int:
    """Plain recursive minimax value for the mover (+1 = mover)."""
    if _winner(cells) == -1:
        return -1
    empty = [i for i in range(9) if cells[i] == 0]
    if not empty:
        return 0
    best = -2
    for i in empty:
        child = tuple(-c for c in cells[:i] + (1,) + cells[i + 1 :])
        best = max(best, -_negamax(child))
    return best


def test_all_reachable_positions_match_reference_minimax():
    sol = solve()
    seen, frontier = {}, [tuple([0] * 9)]
    while frontier:
        nxt = []
        for c in frontier:
            if c in seen:
                continue
            seen[c] = True
            if _winner(c) != 0 or 0 not in c:
                continue
            for i in range(9):
                if c[i] == 0:
                    nxt.append(tuple(-x for x in c[:i] + (1,) + c[i + 1 :]))
        frontier = nxt
    positions = np.array(list(seen), np.int32)
    # The 5478 legal positions (the mover is fixed by the piece counts, so the
    # mover-relative view is one-to-one).
    assert len(positions) == 5478
    idx = np.asarray(encode(positions))
    ref = np.array([_negamax(tuple(p)) for p in positions.tolist()])
    np.testing.assert_array_equal(sol.value[idx], ref)
    # Optimal moves: legal, non-empty on non-terminal boards, and value-preserving.
    for p, i in zip(positions.tolist(), idx.tolist()):
        opt = sol.optimal[i]
        if sol.terminal[i]:
            assert not opt.any()
            continue
        assert opt.any() and all(p[m] == 0 for m in np.flatnonzero(opt))
        for m in np.flatnonzero(opt).tolist():
            child = tuple(-x for x in p[:m] + [1] + p[m + 1 :])
            assert -_negamax(child) == sol.value[i]


def test_solve_is_cached():
    assert solve() is solve()


# --- through the device env -----------------------------------------------------------

B = 64  # first half: perfect vs perfect; second half: perfect vs random
T = 80  # steps (each game takes at most 10: 9 moves and the auto-reset step)


@pytest.fixture(scope="module")
def games():
    """One compiled scan; per env ``seat`` = the perfect player's player id (alternates by env)."""
    env = make_env("pgx:tic_tac_toe")
    seats = jnp.arange(B, dtype=jnp.int32) % 2
    other_random = jnp.arange(B) >= B // 2

    @jax.jit
    def run(key):
        key, reset_key = jax.random.split(key)
        state, ts = reset_batch(env, jax.random.split(reset_key, B))

        def body(carry, key):
            state, ts = carry
            k1, k2 = jax.random.split(key)
            perfect = perfect_opponent(k1, state, ts)
            perfect_obs = perfect_opponent(k1, None, ts)  # decoded from the observation instead
            rand = make_opponent("random", env.spec.name)(k2, state, ts)
            perfect_turn = ts.to_play == seats
            action = jnp.where(perfect_turn | ~other_random, perfect, rand)
            legal_ok = jnp.take_along_axis(ts.legal_actions, action[:, None], 1)[:, 0] | ts.is_last
            same_cells = jnp.all(cells_from_pgx(state.inner) == cells_from_observation(ts.observation), -1)
            nstate, nts = step_batch(env, state, action)
            out = dict(
                to_play=ts.to_play,
                is_first=ts.is_first,
                done=nts.is_last & ~ts.is_last,
                reward=nts.reward,
                legal_ok=legal_ok,
                same_cells=same_cells,
                same_action=(perfect == perfect_obs),
            )
            return (nstate, nts), out

        _, outs = jax.lax.scan(body, (state, ts), jax.random.split(key, T))
        return outs

    outs = jax.device_get(run(jax.random.PRNGKey(0)))
    outs = {k: np.asarray(v) for k, v in outs.items()}
    seats_np = np.asarray(seats)
    results = {"pp": [], "pr": []}  # (perfect's outcome, perfect moved first)
    for b in range(B):
        first = None
        for t in range(T):
            if outs["is_first"][t, b]:
                first = outs["to_play"][t, b] == seats_np[b]
            if outs["done"][t, b] and first is not None:
                mover_perfect = outs["to_play"][t, b] == seats_np[b]
                r = outs["reward"][t, b]
                results["pr" if b >= B // 2 else "pp"].append((r if mover_perfect else -r, bool(first)))
    return outs, results


def test_perfect_moves_are_legal_and_decoders_agree(games):
    outs, _ = games
    assert outs["legal_ok"].all()
    assert outs["same_cells"].all()
    assert outs["same_action"].all()


def test_perfect_vs_perfect_always_draws(games):
    _, results = games
    pp = results["pp"]
    print(f"perfect vs perfect: {len(pp)} games")
    assert len(pp) >= 200
    assert all(o == 0 for o, _ in pp)


def test_perfect_vs_random_never_loses(games):
    _, results = games
    pr = results["pr"]
    assert len(pr) >= 200
    outcomes = np.array([o for o, _ in pr])
    first = np.array([f for _, f in pr])
    assert first.any() and (~first).any()  # perfect played both X and O
    assert (outcomes >= 0).all()
    print(f"perfect vs random: {len(pr)} games, wins {(outcomes > 0).mean():.2f}, "
          f"as X {(outcomes[first] > 0).mean():.2f}, as O {(outcomes[~first] > 0).mean():.2f}")
    assert (outcomes > 0).mean() > 0.6
    assert (outcomes[first] > 0).mean() > 0.8  # as X, perfect beats random nearly always


# --- make_opponent --------------------------------------------------------------------


def test_make_opponent():
    from moozi.workers.device_actor import random_opponent

    assert make_opponent("random", "gymnax:CartPole-v1") is random_opponent
    assert make_opponent("random", "pgx:tic_tac_toe") is random_opponent
    assert make_opponent("perfect", "pgx:tic_tac_toe") is perfect_opponent


def test_make_opponent_errors():
    with pytest.raises(ValueError, match="only available for tic-tac-toe") as e:
        make_opponent("perfect", "pgx:connect_four")
    assert "random" in str(e.value) and "perfect" in str(e.value)
    with pytest.raises(ValueError, match="unknown opponent 'minimax'") as e:
        make_opponent("minimax", "pgx:tic_tac_toe")
    assert "'random'" in str(e.value) and "'perfect'" in str(e.value)
