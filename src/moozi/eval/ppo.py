"""``moozi baseline ppo``: PPO on a MinAtar game under a named protocol, trained by rejax (a maintained JAX RL
library; nothing of PPO is written here), for the scores beside moozi's (docs/results/thesis-protocol).

The recipe is gymnax-blines' (the one behind gymnax's published MinAtar PPO figures, ``agents/<Game>-MinAtar/
ppo.yaml``, the same for all four games): 64 environments, 128 steps per rollout, 8 minibatches, 4 epochs,
learning rate 5e-4, gradient norm 0.5, gamma 0.999, GAE lambda 0.95, clip 0.2, entropy 0.01, value 0.5, separate
actor and critic MLPs of 256 x 2 ReLU over the flattened board. gymnax-blines warms the learning rate up over
the first 5% of updates; rejax's PPO has no warm-up, so here the rate is 5e-4 from the start.

Training runs on gymnax's port (its device path; the protocol's episode cap as the port's
``max_steps_in_episode``), in chunks of ``eval_every`` frames, each followed by ``curve_games`` test games on the
port (rejax's evaluation: the policy's sampled moves). The last params are then played over ``games`` games on
the original MinAtar package (the protocol's sticky actions, action set and cap, via moozi's bridge) and on the
port. Everything goes to ``OUT/result.json`` with the params in ``OUT/params.msgpack``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from moozi.errors import ConfigError

RECIPE = dict(num_envs=64, num_steps=128, num_minibatches=8, num_epochs=4, learning_rate=5e-4, max_grad_norm=0.5,
              gamma=0.999, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01, vf_coef=0.5)
"""gymnax-blines' MinAtar PPO settings, as rejax's PPO names them."""
NETWORK = dict(hidden_layer_sizes=(256, 256), activation="relu")


def _import_rejax():
    try:
        import rejax
        import rejax.evaluate  # noqa: F401  (its evaluate, a module of the same name as the function)
    except ImportError as e:
        raise ImportError(f"moozi baseline ppo needs rejax: pip install 'moozi[baselines]' [{e}]") from e
    return rejax


def _check(name: str, value, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{name} = {value!r} is invalid: allowed an integer >= {low}")
    return value


def port_game(game: str, protocol: str):
    """``(env, env_params, protocol)``: gymnax's port of ``game`` with the named protocol's cap, behind gymnax's
    own adapter to the five-value step rejax 0.1 calls (gymnax 1.0 returns terminated and truncated apart)."""
    import gymnax
    from gymnax.wrappers.compat import LegacyStepAPIWrapper

    from moozi.envs.protocol import GAMES, GYMNAX_IDS, named_protocol

    if game not in GAMES:
        raise ConfigError(f"--game {game!r} is invalid: allowed {', '.join(GAMES)}")
    rules = named_protocol(protocol, game, "minatar")
    class Port(LegacyStepAPIWrapper):
        def __deepcopy__(self, memo):  # rejax deep-copies its config; the adapter's proxying breaks the default
            return self

    env, params = gymnax.make(GYMNAX_IDS[game])
    return Port(env), params.replace(max_steps_in_episode=rules.max_episode_steps), rules


def play_original(act_batch, game: str, protocol: str, games: int, seed: int) -> np.ndarray:
    """``[games]`` returns of ``act_batch`` (``obs [N, 10, 10, C] -> actions [N]``, numpy) on the original MinAtar
    package under the named protocol (moozi's bridge; game ``i`` reset with seed ``seed + i``)."""
    from moozi.envs import make_env
    from moozi.envs.protocol import named_protocol, protocol_overrides

    rules = named_protocol(protocol, game, "minatar")
    kwargs = {k.split(".")[-1]: v for k, v in protocol_overrides(protocol, f"minatar:{game}").items()
              if k.startswith("env.kwargs.")}
    envs = [make_env(f"minatar:{game}", **kwargs) for _ in range(games)]
    obs = np.stack([np.asarray(e.reset(seed + i).observation, np.float32) for i, e in enumerate(envs)])
    returns, live, moves = np.zeros(games), np.ones(games, bool), 0
    while live.any() and moves < rules.max_episode_steps:
        actions = np.asarray(act_batch(obs))
        for i in np.flatnonzero(live):
            step = envs[i].step(int(actions[i]))
            returns[i] += step.reward
            obs[i] = step.observation
            live[i] = not (step.terminated or step.truncated)
        moves += 1
    return returns


def train_ppo(game: str, protocol: str = "thesis", seed: int = 0, frames: int | None = None,
              eval_every: int = 500_000, curve_games: int = 32, games: int = 64, out: Path | str | None = None,
              say=print) -> dict:
    """Train PPO (rejax, :data:`RECIPE`) on ``game`` under ``protocol`` for ``frames`` env frames (default the
    protocol's budget), with a test every ``eval_every`` frames; then ``games`` games on the original package
    and on the port. Returns the result (also written to ``out/result.json``)."""
    import jax
    import jax.numpy as jnp
    from flax import serialization

    from moozi.eval.evaluate import mean_interval

    rejax = _import_rejax()
    from rejax.evaluate import evaluate as rejax_evaluate
    env, env_params, rules = port_game(game, protocol)
    frames = rules.max_env_frames if frames is None else _check("--frames", frames, 1)
    eval_every = _check("--eval-every", eval_every, RECIPE["num_envs"] * RECIPE["num_steps"])
    _check("--curve-games", curve_games, 1)
    _check("--games", games, 1)
    out = Path(out or f"runs/ppo-{game}-{protocol}-s{seed}")
    out.mkdir(parents=True, exist_ok=True)
    per_chunk = RECIPE["num_envs"] * RECIPE["num_steps"] * int(np.ceil(eval_every / (RECIPE["num_envs"] * RECIPE["num_steps"])))
    chunks = int(np.ceil(frames / per_chunk))
    cap = int(rules.max_episode_steps)

    def eval_callback(algo, ts, rng):
        act = algo.make_act(ts)
        lengths, returns = rejax_evaluate(act, rng, env, env_params, curve_games, cap)
        return returns

    algo = rejax.PPO.create(env=env, env_params=env_params, total_timesteps=per_chunk, eval_freq=per_chunk,
                            skip_initial_evaluation=True, agent_kwargs=dict(NETWORK), **RECIPE)
    algo = algo.replace(eval_callback=eval_callback)
    train = jax.jit(algo.train)
    started = time.monotonic()
    ts = algo.init_state(jax.random.key(seed))
    curve = []
    for c in range(chunks):
        ts, evaluation = train(train_state=ts)
        done = (c + 1) * per_chunk
        mean = float(np.asarray(evaluation).mean())
        curve.append([done, mean])
        say(f"moozi baseline ppo {game} ({protocol}) seed {seed}: {done:,} frames, test {mean:.1f} over "
            f"{curve_games} games, {time.monotonic() - started:.0f} s")
    wall = time.monotonic() - started
    act = algo.make_act(ts)
    actor = algo.actor

    @jax.jit
    def act_batch(obs, key):
        keys = jax.random.split(key, obs.shape[0])
        return jax.vmap(lambda o, k: actor.apply(ts.actor_ts.params, o[None], k, method="act")[0])(obs, keys)

    key = [jax.random.key(seed + 7919)]

    def act_numpy(obs):
        key[0], sub = jax.random.split(key[0])
        return act_batch(jnp.asarray(obs), sub)

    original = play_original(act_numpy, game, protocol, games, seed=10_000 * (seed + 1))
    port = np.asarray(rejax_evaluate(act, jax.random.key(seed + 104729), env, env_params, games, cap)[1])
    (out / "params.msgpack").write_bytes(serialization.to_bytes(jax.device_get(ts.actor_ts.params)))

    def final(x, package):
        mean, low, high = mean_interval(x)
        return {"package": package, "games": int(x.size), "mean": mean, "ci": [low, high],
                "min": float(x.min()), "max": float(x.max())}

    result = {
        "game": game, "protocol": rules.as_dict(), "protocol_name": protocol, "trained_on": "gymnax", "seed": seed,
        "env_frames": chunks * per_chunk, "wall_s": wall, "curve": curve, "curve_games": curve_games,
        "final": final(original, "minatar"), "final_port": final(port, "gymnax"),
        "recipe": {**RECIPE, **NETWORK, "hidden_layer_sizes": list(NETWORK["hidden_layer_sizes"])},
        "library": f"rejax {getattr(rejax, '__version__', _version('rejax'))}",
        "policy": "the actor's sampled moves (as rejax and gymnax-blines evaluate)",
    }
    (out / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def _version(package: str) -> str:
    from importlib.metadata import version

    try:
        return version(package)
    except Exception:  # noqa: BLE001 - only a label
        return "unknown"
