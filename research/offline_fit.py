"""Can a fresh network fit a run's replay? Train one offline on the replay saved in a run's newest checkpoint.

Self-play and learning feed each other, so a run that does not learn leaves two suspects: data that
cannot be fitted (targets that are noise) or a learner that cannot fit (a network or optimiser stuck).
This takes the run's own replay (fixed: no acting) and trains a freshly initialised network on it
with the run's config, or with changed learner / model / target settings (``--set``), reporting the
mean loss terms and the targets' own floor per stretch of updates, and first how sharp the policy
targets at episode starts are against how flat their average is (sharp and flat: noise).

Found with it (docs/results/connect4-alphazero-fix): the replay of the ``connect4`` preset in
AlphaZero mode stayed at ln 7 and a constant value for any network (the policy targets were sharp
noise), while the MuZero run's replay trained the same network at once; with a 1e-3 learning rate,
the identity value on 3 bins and value_coef 1 the same data left its plateau after about 1,000 updates.

Also found with it (docs/results/minatar-replay-weights): on the Asterix preset's replay a fresh model
learnt nothing one step ahead in 1,200 updates with the run's importance weights (``replay.beta`` 1; the
effective batch was about 14 of 128) or with uniform sampling, and saw rewards and deaths with
``--beta 0`` (``--foresight``: ``model_foresight.py``'s measures at each report).

Usage: ``python research/offline_fit.py RUN [--updates 1600] [--reports 8] [--set learner.l2_coef=0 ...]
[--beta B] [--foresight] [--update-priorities] [--boost-setbacks F]``. Prints one line per report and a JSON line last.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import numpy as np
import yaml

from moozi.checkpoint import list_checkpoints, read_chunked_part
from moozi.config import apply_overrides, config_from_dict
from moozi.learner import Learner
from moozi.parts import build_parts
from moozi.update import make_window_update_fn

TERMS = ("loss/policy", "loss/value", "loss/l2", "loss/floor")


def start_targets(learner: Learner, config, frame_scale: float, samples: int = 4096) -> dict:
    """The policy targets at episode starts (one position, many games): sharp targets whose average is flat
    are noise; a network can only learn their average."""
    from moozi.update import build_batch

    sample = learner.replay.sample(samples)
    batch = build_batch(jax.device_put(sample.windows), sample.positions, sample.weights, target_config=config.targets,
                        num_actions=learner.model.num_actions, frame_scale=frame_scale)
    start = np.asarray(sample.positions) == np.asarray(sample.windows.first)
    policy = np.asarray(batch.targets.policy[:, 0])[start]
    if not len(policy):
        return {"positions": 0}
    entropy = -(policy * np.log(np.maximum(policy, 1e-12))).sum(-1)
    mean = policy.mean(0)
    return {"positions": int(start.sum()), "mean_peak": round(float(policy.max(-1).mean()), 3),
            "mean_entropy": round(float(entropy.mean()), 3),
            "entropy_of_mean": round(float(-(mean * np.log(np.maximum(mean, 1e-12))).sum()), 3)}


def effective_batch(replay, batch_size: int, draws: int = 200, seed: int = 0) -> dict:
    """Kish's effective sample size, (sum w)^2 / sum w^2, of the importance weights of ``draws`` batches at the
    replay's beta: how many of ``batch_size`` samples a batch is worth when a few weights dwarf the rest."""
    sizes = []
    for _ in range(draws):
        _, w = replay.sample_ids(batch_size)
        w = w.astype(np.float64)
        sizes.append(w.sum() ** 2 / (w**2).sum())
    return {"batch_size": batch_size, "beta": replay.beta, "median": round(float(np.median(sizes)), 1),
            "p10": round(float(np.percentile(sizes, 10)), 1), "p90": round(float(np.percentile(sizes, 90)), 1)}


def _foresight_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("moozi_bench_model_foresight", Path(__file__).with_name("model_foresight.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def boost_setbacks(replay, game: str, factor: float) -> int:
    """Multiply the priority of every stored position whose next step is the game's setback
    (``model_foresight.SETBACKS``: Freeway's chicken sent back by a car) by ``factor``: do the dynamics
    learn the setback when it carries weight in the batches? Returns how many positions were boosted."""
    setback = _foresight_module().SETBACKS.get(game)
    if setback is None:
        raise SystemExit(f"{game} declares no setback to boost (model_foresight.SETBACKS)")
    cap = replay.config.capacity
    slots = np.flatnonzero(replay._sampleable)
    rec = replay._slot_traj[slots] % cap
    start = replay._traj_start[rec]
    has_next = (slots - start) % cap < replay._traj_len[rec] - 1
    slots = slots[has_next]
    after = (slots + 1) % cap
    hit = setback(replay._frames[slots], replay._frames[after], replay._rewards[after])
    replay._set_priorities(slots[hit], replay._priority[slots[hit]] * factor)
    return int(hit.sum())


def fit(run: Path, updates: int, reports: int, overrides: list[str], seed: int = 1, beta: float | None = None,
        foresight: bool = False, update_priorities: bool = False, boost: float | None = None) -> dict:
    """``beta``: the importance-sampling exponent to sample with (a checkpoint restores its run's own);
    ``foresight``: add :mod:`model_foresight`'s measures (single-player JAX-native games) to each report;
    ``update_priorities``: write each update's new priorities back to the replay, as training does (default:
    sample with the priorities the run left, fixed); ``boost``: :func:`boost_setbacks` by this factor first."""
    data = apply_overrides(yaml.safe_load((run / "config.yaml").read_text()), overrides)
    config = config_from_dict(data)
    env, model = build_parts(config)
    learner = Learner(model, env.spec, config.learner, config.targets, config.replay, jax.random.key(seed),
                      replay_seed=seed)
    found = list_checkpoints(run / "checkpoints")
    if not found:
        raise SystemExit(f"{run} has no checkpoint with a replay to fit")
    checkpoint = found[-1].path
    learner.replay.load_chunks(*read_chunked_part(checkpoint, "replay", verified=True))
    if beta is not None:
        learner.replay.beta = beta
    boosted = boost_setbacks(learner.replay, config.env.name, boost) if boost else None
    look = None
    if foresight:
        fs = _foresight_module()
        probe = fs.make_probe(env, config.targets.history_length, steps=100)
        reader = fs.make_look(model, env.spec.num_actions, config.targets.discount)  # compiled once
        seen = fs.replay_transitions(learner.replay, config.targets, model.num_actions, env.spec.observation_scale,
                                     config.env.name)
        margins = fs.make_margins(model, config.targets.discount)  # compiled once

        def look(params):
            found = fs.foresight(model, params, probe, config.targets.discount, reader)
            if seen is not None:
                found.update(fs.replay_setback(model, params, seen, config.targets.discount, margins))
            return found
    starts = start_targets(learner, config, env.spec.observation_scale)
    effective = effective_batch(learner.replay, config.schedule.batch_size)
    print(json.dumps({"start_targets": starts, "effective_batch": effective}), flush=True)
    update = make_window_update_fn(model, config.learner, config.targets, env.spec.observation_scale, ())
    state, rows, stretch, start = learner.state, [], [], time.perf_counter()
    every = max(1, updates // reports)
    for i in range(1, updates + 1):
        sample = learner.replay.sample(config.schedule.batch_size)
        state, metrics, prio = update(state, jax.device_put(sample.windows), sample.positions, sample.weights)
        if update_priorities:
            learner.replay.update_priorities(sample.ids, np.asarray(prio))
        stretch.append([float(metrics[k]) for k in TERMS])
        if i % every == 0 or i == updates:
            row = {"updates": i, **dict(zip(TERMS, np.mean(stretch, axis=0).round(4).tolist())),
                   "wall_s": round(time.perf_counter() - start, 1)}
            if look is not None:
                row["foresight"] = look(state.params)
            rows.append(row)
            stretch = []
            print(json.dumps(row), flush=True)
    if hasattr(env, "close"):
        env.close()
    return {"run": str(run), "checkpoint": str(checkpoint), "replay_steps": int(learner.replay.size),
            "overrides": overrides, "beta": learner.replay.beta, "update_priorities": update_priorities,
            "boost": boost, "boosted_positions": boosted, "effective_batch": effective, "start_targets": starts,
            "updates": updates, "batch_size": config.schedule.batch_size, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--updates", type=int, default=1600)
    parser.add_argument("--reports", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--beta", type=float, default=None,
                        help="importance-sampling exponent to sample with (default: the checkpoint's)")
    parser.add_argument("--foresight", action="store_true",
                        help="report the model's foresight too (model_foresight.py; single-player JAX-native games)")
    parser.add_argument("--update-priorities", action="store_true",
                        help="write each update's new priorities back to the replay, as training does")
    parser.add_argument("--boost-setbacks", dest="boost", type=float, default=None, metavar="F",
                        help="multiply the priority of positions whose next step is the game's setback by F")
    args = parser.parse_args()
    print(json.dumps(fit(args.run, args.updates, args.reports, args.overrides, args.seed, args.beta, args.foresight,
                         args.update_priorities, args.boost)))


if __name__ == "__main__":
    main()
