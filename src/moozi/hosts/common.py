"""What the hosted components share: their seeds, the versions a cluster must agree on, slowing down for
tests, and giving an actor published params."""

from __future__ import annotations

import time

import numpy as np


def worker_seed(seed: int, *ids: int) -> int:
    """An independent integer seed for the component named by ``ids`` of a run seeded ``seed``."""
    return int(np.random.SeedSequence([int(seed), *map(int, ids)]).generate_state(1, np.uint32)[0])


def versions() -> dict[str, str]:
    """The versions a cluster's processes must agree on."""
    import jax

    import moozi

    return {"moozi": moozi.__version__, "jax": jax.__version__}


def check_versions(expected: dict | None) -> None:
    """Refuse to run a component whose moozi / jax differ from the driver's (a mixed cluster)."""
    if not expected:
        return
    here = versions()
    wrong = [f"{k} {here[k]} here but {v} on the driver" for k, v in expected.items() if here.get(k) != v]
    if wrong:
        import socket

        raise RuntimeError(f"version mismatch on node {socket.gethostname()}: " + "; ".join(wrong)
                           + ". Install the same versions on every node of the cluster.")


def slow_down(since: float, factor: float) -> None:
    """Testing knob: make the work since ``since`` take ``factor`` times as long."""
    if factor > 1.0:
        time.sleep((factor - 1.0) * (time.perf_counter() - since))


def root_keys(seed: int):
    import jax

    return jax.random.split(jax.random.key(seed), 3)  # learner, training actor, testing actor


def use_params(actor, published: dict) -> None:
    """Give ``actor`` a learner's published ``{'version', 'params'}``; to the device only on a new version."""
    if not isinstance(published, dict) or "version" not in published:
        raise TypeError("expected the {'version', 'params'} object a learner publishes")
    version = int(published["version"])
    if actor.params is None or version != actor.version:
        actor.set_params(version, published["params"])
