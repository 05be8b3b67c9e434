"""Does a learned model see one step ahead? Its reward and r + gamma v for every action, against the real game.

A MuZero run that tests at random play's level may search with a model that cannot tell a move that
scores or dies from one that does not; the search then has nothing to find, and its targets are noise.
This plays uniformly random moves in a JAX-native single-player game (gymnax), and at every state tries
each action in the real game (does it end the game? what reward?) and in the run's model (the predicted
reward, and ``r + gamma v`` of the state it leads to). Reported:

* ``p_safe_above_fatal``: over states where some moves end the game and some do not, the share of
  (safe, fatal) move pairs the model ranks the right way (0.5: blind; 1: sees every death coming). In
  Freeway nothing ends the game; there a move is fatal when a car sends the chicken back to the bottom
  row (:func:`freeway_setback`), which costs the moves it had climbed;
* ``reward_on_rewarded`` / ``reward_on_others``: the mean predicted reward for moves the game rewards and
  for the rest (equal: blind to rewards);
* ``value_sd``: the spread of the value over the states (about 0: one constant);
* ``p_safe_above_fatal_real``: the same ranking by the real reward plus ``gamma v`` of the real next state
  (the representation and value of the frame the game gives, no dynamics): where it is high and
  ``p_safe_above_fatal`` is about 0.5, the dynamics fails the value; where both are about 0.5, the value
  itself does not tell the states apart, and no dynamics can rank the moves;
* ``q_gap`` / ``q_gap_real``: over the same states, the mean of (safe moves' mean q minus fatal moves'),
  through the dynamics and by the real next frame: how much the model marks the setback, in value units;
* ``action_corr``: over all states, the correlation between the dynamics' and the real ranking's q once
  each state's mean is taken out (what each move adds): high with a ``p_safe_above_fatal`` of 0.5 means
  the dynamics learnt what a move does in general (climbing pays) but not where it is fatal;

* with ``offline_fit.py --foresight`` in a game with a setback: ``replay_auc`` / ``replay_auc_real``
  (:func:`replay_setback`), the same question on the run's own replay, the data the model trains on
  (a model blind on random play may still see what it was trained on).

Found with it (docs/results/minatar-replay-weights): the Asterix preset's model after 7,288 updates
ranked safe above fatal moves 0.345 of the time, predicted 0.003 for rewarded moves and 0.0026 for the
rest, and its value was a constant (sd 0.007).

Usage: ``python research/model_foresight.py RUN [RUN ...] [--steps 300] [--checkpoint latest]``; one JSON
line per run. ``make_probe`` / ``foresight`` are reused by ``offline_fit.py --foresight``.
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

from moozi.envs.device import reset_batch, step_batch
from moozi.model.history import history_init, history_observation, history_push


def freeway_setback(before, after, reward):
    """Freeway's fatal move: the chicken (channel 0 of the ``[B, 10, 10, 7]`` frames) is back on the bottom
    row (9) without scoring, from row 7 or above (one step down from row 8 also lands on row 9).
    Returns ``[B]`` bools."""
    row = lambda frames: np.argmax(np.asarray(frames)[..., 0].max(-1), -1)  # noqa: E731
    return (row(after) == 9) & (row(before) <= 7) & (np.asarray(reward) == 0)


# Games where something other than the episode's end is the loss the model should see coming.
SETBACKS = {"gymnax:Freeway-MinAtar": freeway_setback}


def make_probe(env, history_length: int, steps: int = 300, batch: int = 64, seed: int = 1) -> dict:
    """States of uniformly random play and, for each, every action's outcome in the real game.

    Returns ``histories`` (a list of ``steps`` rolling histories ``[batch]``), ``next_observations`` (a list
    of ``steps`` arrays ``[batch, A, H, W, C]``, each action's real next observation, the env's dtype),
    ``fatal`` / ``terminal`` / ``reward`` ``[steps * batch, A]`` (the action ends the game or is the game's
    setback in ``SETBACKS`` / ends it / its reward) and ``valid [steps * batch]`` (the state is not an
    episode's last)."""
    if getattr(env.spec, "num_players", 1) != 1:
        raise SystemExit(f"{env.spec.name}: the foresight probe is for single-player games")
    actions = env.spec.num_actions
    reset = jax.jit(lambda keys: reset_batch(env, keys))
    step = jax.jit(lambda states, a: step_batch(env, states, a))
    push = jax.jit(history_push)
    states, ts = reset(jax.random.split(jax.random.key(seed), batch))
    history = push(history_init(batch, env.spec.observation_shape, history_length), ts.observation,
                   jnp.zeros(batch, jnp.int32), ts.is_first)
    rng = np.random.default_rng(seed)
    setback = SETBACKS.get(env.spec.name)
    histories, fatal, terminal, reward, valid, nexts = [], [], [], [], [], []
    for _ in range(steps):
        tried = [step(states, jnp.full(batch, a, jnp.int32))[1] for a in range(actions)]
        nexts.append(np.stack([np.asarray(t.observation) for t in tried], 1))  # [batch, A, H, W, C]
        lost = [np.asarray(t.is_terminal) for t in tried]
        terminal.append(np.stack(lost, -1))
        if setback is not None:
            lost = [d | setback(ts.observation, t.observation, t.reward) for d, t in zip(lost, tried)]
        fatal.append(np.stack(lost, -1))
        reward.append(np.stack([np.asarray(t.reward) for t in tried], -1))
        valid.append(~np.asarray(ts.is_last))
        histories.append(history)
        played = jnp.asarray(rng.integers(0, actions, batch), jnp.int32)
        states, ts = step(states, played)
        history = push(history, ts.observation, played + 1, ts.is_first)
    return {"histories": histories, "next_observations": nexts, "fatal": np.concatenate(fatal),
            "terminal": np.concatenate(terminal), "reward": np.concatenate(reward), "valid": np.concatenate(valid)}


def make_look(model, actions: int, discount: float):
    """The jitted reader ``(params, history, next_observations [B, A, H, W, C]) -> (value, reward [B, A],
    r + gamma v [B, A], real_value [B, A])``, ``real_value`` the value of each action's real next history
    (the representation of the game's frame, no dynamics); build it once and pass it to every
    :func:`foresight` call on the same model (a new one would compile again)."""

    @jax.jit
    def look(p, history, next_observations):
        out = model.initial_inference(p, history_observation(history, model.num_actions))
        rewards, qs = [], []
        for a in range(actions):
            nxt = model.recurrent_inference(p, out.hidden, jnp.full(out.value.shape, a + 1, jnp.int32))
            rewards.append(nxt.reward)
            qs.append(nxt.reward + discount * nxt.value)
        batch = out.value.shape[0]
        real = [model.initial_inference(p, history_observation(
            history_push(history, next_observations[:, a], jnp.full(batch, a + 1, jnp.int32),
                         jnp.zeros(batch, bool)), model.num_actions)).value for a in range(actions)]
        return out.value, jnp.stack(rewards, -1), jnp.stack(qs, -1), jnp.stack(real, -1)

    return look


def safe_above_fatal(q, fatal) -> float | None:
    """The share of (safe, fatal) move pairs of each state that ``q [N, A]`` ranks the right way, a tie
    counting half; ``fatal [N, A]`` bools (states with both kinds of move). None without a pair."""
    right = pairs = 0.0
    for qi, fi in zip(q, fatal):
        gap = qi[~fi][:, None] - qi[fi][None, :]
        right += (gap > 0).sum() + 0.5 * (gap == 0).sum()
        pairs += gap.size
    return round(float(right / pairs), 3) if pairs else None


def safe_minus_fatal(q, fatal) -> float | None:
    """The mean over states of (safe moves' mean ``q`` minus fatal moves'), ``q [N, A]``, ``fatal [N, A]``
    bools (states with both kinds of move). None without a state."""
    if not len(q):
        return None
    gaps = [qi[~fi].mean() - qi[fi].mean() for qi, fi in zip(q, fatal)]
    return round(float(np.mean(gaps)), 4)


def centered_correlation(q, q_real) -> float | None:
    """The correlation of ``q`` and ``q_real`` ``[N, A]`` with each state's mean taken out of both (what
    each move adds to its state). None where either does not vary."""
    a = (q - q.mean(-1, keepdims=True)).ravel()
    b = (q_real - q_real.mean(-1, keepdims=True)).ravel()
    norm = np.sqrt((a * a).sum() * (b * b).sum())
    return round(float((a * b).sum() / norm), 3) if norm > 0 else None


def foresight(model, params, probe: dict, discount: float, look=None) -> dict:
    """The model against the real game on ``probe`` (:func:`make_probe`); see the module docstring.
    ``look``: a reader from :func:`make_look` (default: a new one)."""
    look = look or make_look(model, probe["fatal"].shape[-1], discount)
    looked = [look(params, h, n) for h, n in zip(probe["histories"], probe["next_observations"])]
    ok = probe["valid"]
    value, reward, q, real = (np.concatenate([np.asarray(x[i]) for x in looked])[ok] for i in (0, 1, 2, 3))
    fatal, true_reward = probe["fatal"][ok], probe["reward"][ok]
    q_real = true_reward + discount * np.where(probe["terminal"][ok], 0.0, real)
    mixed = fatal.any(-1) & ~fatal.all(-1)
    rewarded = true_reward != 0
    return {"states": int(ok.sum()), "value_sd": round(float(value.std()), 4),
            "states_with_safe_and_fatal": int(mixed.sum()),
            "p_safe_above_fatal": safe_above_fatal(q[mixed], fatal[mixed]),
            "p_safe_above_fatal_real": safe_above_fatal(q_real[mixed], fatal[mixed]),
            "q_gap": safe_minus_fatal(q[mixed], fatal[mixed]),
            "q_gap_real": safe_minus_fatal(q_real[mixed], fatal[mixed]),
            "action_corr": centered_correlation(q, q_real),
            "rewarded_moves": int(rewarded.sum()),
            "reward_on_rewarded": round(float(reward[rewarded].mean()), 4) if rewarded.any() else None,
            "reward_on_others": round(float(reward[~rewarded].mean()), 4)}


def replay_transitions(replay, target_config, num_actions: int, frame_scale: float, game: str,
                       samples: int = 8192) -> dict | None:
    """Transitions of a run's own replay (the training data) for :func:`replay_setback`: the stacked
    observations at t and t + 1, the move taken and whether it was the game's setback (``SETBACKS``).
    None for a game without a setback."""
    from moozi.update import build_batch

    setback = SETBACKS.get(game)
    if setback is None:
        return None
    state = replay.rng.bit_generator.state  # leave the buffer's own draws (a fit's batches) as they were
    ids, weights = replay.sample_ids(samples, beta=0.0)
    replay.rng.bit_generator.state = state
    windows, positions = replay.windows(ids)
    t = build_batch(jax.device_put(windows), positions, weights, target_config=target_config,
                    num_actions=num_actions, frame_scale=frame_scale).targets
    length, frame = target_config.history_length, replay.frame_shape[-1]
    newest = lambda obs: np.asarray(obs)[..., :length * frame][..., (length - 1) * frame:]  # noqa: E731
    ok = np.asarray(t.consistency_mask) > 0
    hit = setback(newest(t.observation), newest(t.next_observation), np.asarray(t.reward[:, 1]))
    return {"observation": np.asarray(t.observation)[ok], "next_observation": np.asarray(t.next_observation)[ok],
            "action": np.asarray(t.actions[:, 0])[ok], "reward": np.asarray(t.reward[:, 1])[ok], "hit": hit[ok]}


def make_margins(model, discount: float):
    """The jitted reader ``(params, obs, next_obs, action, reward) -> (margin, drop)`` of
    :func:`replay_setback`: the dynamics' margin of the best other move over the move taken and the value's
    real drop; build it once per model and pass it to every
    call (a new one would compile again)."""
    actions = model.num_actions - 1

    @jax.jit
    def margins(p, obs, nxt, action, reward):
        out = model.initial_inference(p, obs)
        qs = jnp.stack([(lambda s: s.reward + discount * s.value)(model.recurrent_inference(
            p, out.hidden, jnp.full(action.shape, a + 1, jnp.int32))) for a in range(actions)], -1)
        def margin(q):  # the best other move's q minus the taken move's, q [B, moves]
            taken = jnp.take_along_axis(q, (action - 1)[:, None], -1)[:, 0]
            return jnp.where(jax.nn.one_hot(action - 1, actions) > 0, -jnp.inf, q).max(-1) - taken

        real = model.initial_inference(p, nxt)
        return margin(qs), out.value - (reward + discount * real.value)

    return margins


def replay_setback(model, params, transitions: dict, discount: float, margins=None, chunk: int = 2048) -> dict:
    """Does the dynamics see the setbacks of the data it trains on? Over the replay's transitions
    (:func:`replay_transitions`): ``replay_auc``, the ROC AUC with which the dynamics' margin of the best
    other move over the move taken (``r + gamma v`` of each first dynamics step) picks out the setbacks
    (within each state, so a state's own worth does not enter; 0.5: blind); ``replay_auc_real``, the
    same for the real change of value (``r + gamma v`` of the real next frame minus ``v`` of the state):
    does the value itself tell a setback? ``margins``: a reader from :func:`make_margins` (default: a new one)."""
    from sklearn.metrics import roc_auc_score

    margins = margins or make_margins(model, discount)
    parts = [margins(params, transitions["observation"][i:i + chunk], transitions["next_observation"][i:i + chunk],
                     transitions["action"][i:i + chunk], transitions["reward"][i:i + chunk])
             for i in range(0, len(transitions["action"]), chunk)]
    dyn, real = (np.concatenate([np.asarray(x[j]) for x in parts]) for j in (0, 1))
    hit = transitions["hit"]
    found = {"replay_transitions": len(hit), "replay_setbacks": int(hit.sum())}
    if 0 < hit.sum() < len(hit):
        found.update(replay_auc=round(float(roc_auc_score(hit, dyn)), 3),
                     replay_auc_real=round(float(roc_auc_score(hit, real)), 3))
    return found


def read_run(run: str, steps: int = 300, checkpoint: str = "latest") -> dict:
    from moozi.run_dir import open_run

    opened = open_run(run, checkpoint, keep_env=True)
    try:
        probe = make_probe(opened.env, opened.config.targets.history_length, steps)
    finally:
        opened.env.close()
    return {"run": run, "updates": int(opened.meta["counters"]["updates"]),
            **foresight(opened.model, opened.params, probe, opened.config.targets.discount)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--steps", type=int, default=300, help="random-play steps of 64 games (default 300)")
    parser.add_argument("--checkpoint", default="latest")
    args = parser.parse_args()
    for run in args.runs:
        print(json.dumps(read_run(run, args.steps, args.checkpoint)), flush=True)


if __name__ == "__main__":
    main()
