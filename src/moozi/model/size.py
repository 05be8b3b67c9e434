"""How big a run is at its start: parameters per network part (AlphaZero.jl's initial report) and the memory
its state takes, estimated from the config and measured.

Parts are named by the networks' module prefixes: representation (``repr_``), dynamics (``dyn_`` and the
reward head), prediction (``pred_``, the value and policy heads), projection (``proj_``, the
self-consistency loss's); Stochastic MuZero's afterstate prediction (``after_``), chance dynamics (``chance_``)
and encoder (``encoder_``); anything else is ``other``.
"""

from __future__ import annotations

import numpy as np

PARTS = (("representation", ("repr_",)), ("dynamics", ("dyn_", "reward_head")),
         ("prediction", ("pred_", "value_head", "policy_head")), ("projection", ("proj_",)),
         ("afterstate", ("after_",)), ("chance", ("chance_",)), ("encoder", ("encoder_",)))

LEARNER_COPIES = 5
"""float32 copies of the parameters the learner holds: the online network, the target network, Adam's two moments
and the copy published to the workers."""


def part_of(name: str) -> str:
    """The network part a top-level parameter module belongs to (``other`` if no prefix matches)."""
    for part, prefixes in PARTS:
        if name.startswith(prefixes):
            return part
    return "other"


def parameter_counts(params) -> dict[str, int]:
    """Parameters per part and ``total`` of a network's params (arrays or ``jax.eval_shape`` structs); parts
    with none are left out."""
    import jax

    tree = params.get("params", params)
    counts: dict[str, int] = {}
    for name, sub in tree.items():
        n = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(sub))
        counts[part_of(name)] = counts.get(part_of(name), 0) + n
    counts = {part: counts[part] for part, _ in (*PARTS, ("other", ())) if counts.get(part)}
    counts["total"] = sum(counts.values())
    return counts


def replay_bytes(capacity: int, frame_shape, frame_dtype, num_actions: int) -> int:
    """Bytes of a replay buffer's preallocated arrays (:attr:`moozi.replay.ReplayBuffer.nbytes`) for
    ``capacity`` steps of ``frame_shape`` frames of ``frame_dtype``, ``num_actions`` augmented actions:
    the frame, the policy (float32), the legal moves (bool) and 51 bytes of per-step scalars."""
    frame = int(np.prod(frame_shape)) * np.dtype(frame_dtype).itemsize
    return int(capacity) * (frame + 4 * int(num_actions) + (int(num_actions) - 1) + 51)


def footprint(config, spec, model) -> dict:
    """The run's size before it starts: ``parameters`` (:func:`parameter_counts`) and ``memory_mb``:
    ``learner_state`` (:data:`LEARNER_COPIES` float32 copies), ``replay`` (its arrays at capacity, allocated
    at the start and filled as it fills) and their sum ``estimate``."""
    import jax

    counts = parameter_counts(jax.eval_shape(model.init, jax.random.key(0)))
    state = LEARNER_COPIES * 4 * counts["total"] / 2**20
    replay = replay_bytes(config.replay.capacity, spec.observation_shape, spec.observation_dtype,
                          model.num_actions) / 2**20
    return {"parameters": counts, "memory_mb": {"learner_state": round(state, 1), "replay": round(replay, 1),
                                                "estimate": round(state + replay, 1)}}


def describe(size: dict) -> str:
    """One line for train.log: the counts by part and the memory, estimated and (``measured_mb``) measured."""
    p, m = size["parameters"], size["memory_mb"]
    parts = ", ".join(f"{k} {v:,}" for k, v in p.items() if k != "total")
    line = (f"network: {p['total']:,} parameters ({parts}); its state estimated {m['estimate']:,.0f} MB (learner "
            f"state {m['learner_state']:,.1f} MB: the network, its target, Adam's moments, the published copy; replay "
            f"{m['replay']:,.0f} MB at capacity)")
    if "measured" in m:
        line += (f"; measured {m['measured']:,.0f} MB resident at the start ({m['measured_of']}, with Python, "
                 "JAX and the compiled programs)")
    return line
