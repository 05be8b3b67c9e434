"""How far a last-bit change in the network moves reanalyze's values and search policies.

Why it exists: on a GPU, reanalyzing with the acting params reproduced the
stored root values within 1e-4 but the Gumbel search policies only within
6.1e-3 (docs/results/gpu-h100). This probe asks whether the search itself is
that sensitive, on any backend: it builds the reanalyze test's setup (the
cartpole preset, tiny), reanalyzes the newest episodes with the acting params,
then with the same params scaled by (1 + eps) leaf by leaf, and prints the
largest change of the root values and of the search policies (and how far
the first reanalysis is from the stored search, 1e-4 on a CPU).

Usage: ``.venv/bin/python research/reanalyze_conditioning.py [--eps 1e-6]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.test_distributed import build_reanalyze_parts, newest_episodes_batch  # noqa: E402  (the reanalyze tests' setup)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eps", type=float, default=1e-6, help="relative change of every parameter")
    args = p.parse_args()
    learner, _, reanalyzer, pub = build_reanalyze_parts(tempfile.mkdtemp())
    batch = newest_episodes_batch(learner, pub)
    _, base, _ = reanalyzer.reanalyze(pub, batch)
    scaled = {"version": pub["version"] + 10**6,  # another version, so the worker takes the new params
              "params": jax.tree.map(lambda x: np.asarray(x) * np.asarray(1 + args.eps, np.asarray(x).dtype), pub["params"])}
    _, moved, _ = reanalyzer.reanalyze(scaled, batch)
    dv, dp, stored_dv, stored_dp = [], [], [], []
    for a, b, old in zip(base, moved, batch["trajectories"]):
        acted = slice(0, int(old.last))
        dv.append(np.abs(a.trajectory.root_values[acted] - b.trajectory.root_values[acted]))
        dp.append(np.abs(a.trajectory.root_policies[acted] - b.trajectory.root_policies[acted]).max(-1))
        stored_dv.append(np.abs(a.trajectory.root_values[acted] - old.root_values[acted]))
        stored_dp.append(np.abs(a.trajectory.root_policies[acted] - old.root_policies[acted]).max(-1))
    dv, dp = np.concatenate(dv), np.concatenate(dp)
    print(json.dumps({
        "backend": jax.default_backend(), "eps": args.eps, "positions": int(dv.size),
        "max_abs_dvalue": float(dv.max()), "max_abs_dpolicy": float(dp.max()),
        "median_abs_dpolicy": float(np.median(dp)),
        "reanalyze_vs_stored": {"max_abs_dvalue": float(np.concatenate(stored_dv).max()),
                                "max_abs_dpolicy": float(np.concatenate(stored_dp).max())},
    }))


if __name__ == "__main__":
    main()
