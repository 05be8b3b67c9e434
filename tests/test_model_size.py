"""A run's size at its start: parameter counts by network part (golden) and the replay's bytes."""

from __future__ import annotations

import numpy as np

from moozi.config import ReplayConfig, TargetConfig
from moozi.model.size import describe, parameter_counts, part_of, replay_bytes
from moozi.replay.buffer import ReplayBuffer


def test_parameter_counts_by_part_golden():
    z = np.zeros
    params = {"params": {"repr_in": {"kernel": z((1, 1, 4, 8)), "bias": z(8)},  # 32 + 8
                         "repr_blocks_0": {"a": {"kernel": z((3, 3, 8, 8))}},  # 576
                         "dyn_in": {"kernel": z((1, 1, 9, 8))}, "reward_head": {"kernel": z((8, 5))},  # 72 + 40
                         "pred_blocks_0": {"kernel": z(10)}, "value_head": {"kernel": z((8, 5))},  # 10 + 40
                         "policy_head": {"kernel": z((8, 3)), "bias": z(3)},  # 27
                         "proj_net": {"kernel": z((8, 8))}, "decoder": {"kernel": z(7)}}}  # 64, 7
    assert parameter_counts(params) == {"representation": 616, "dynamics": 112, "prediction": 77, "projection": 64,
                                        "other": 7, "total": 876}
    assert part_of("dyn_kernels") == "dynamics" and part_of("q_head") == "other"
    line = describe({"parameters": {"representation": 616, "total": 616},
                     "memory_mb": {"learner_state": 0.5, "replay": 12.0, "estimate": 12.5}})
    assert line.startswith("network: 616 parameters (representation 616); its state estimated 12 MB")


def test_replay_bytes_are_the_buffers_arrays():
    for shape, dtype, actions in (((10, 10, 4), "uint8", 4), ((6, 7, 2), "float32", 8)):
        buf = ReplayBuffer(ReplayConfig(capacity=1000, min_size=1), TargetConfig(), shape, actions, frame_dtype=dtype)
        assert replay_bytes(1000, shape, dtype, actions) == buf.nbytes
