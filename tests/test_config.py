"""Config validation: bad values and unknown keys name the field."""

import pytest

from moozi.config import ConfigError, LearnerConfig, ModelConfig, PlannerConfig, TargetConfig, TestingConfig, from_dict, to_dict


@pytest.mark.parametrize(
    "cls, kwargs, message",
    [
        (ModelConfig, {"kind": "transformer"}, "model.kind = 'transformer' is invalid: allowed one of 'resnet', 'mlp'"),
        (ModelConfig, {"support_size": 0}, "model.support_size"),
        (ModelConfig, {"mlp_hidden": (64, -1)}, "model.mlp_hidden"),
        (ModelConfig, {"q_head": True, "dynamics": "simulator"},
         "model.q_head = True is invalid: allowed false with model.dynamics = simulator"),
        (ModelConfig, {"q_head": 1}, "model.q_head = 1 is invalid: allowed true or false"),
        (PlannerConfig, {"kind": "alphabeta"}, "planner.kind"),
        (PlannerConfig, {"num_simulations": 0}, "planner.num_simulations = 0"),
        (PlannerConfig, {"dirichlet_fraction": 1.5}, "planner.dirichlet_fraction"),
        (PlannerConfig, {"value_scale": 0}, "planner.value_scale = 0 is invalid"),
        (PlannerConfig, {"rescale_values": "no"}, "planner.rescale_values"),
        (TargetConfig, {"discount": 1.2}, "targets.discount = 1.2 is invalid: allowed a number in [0.0, 1.0]"),
        (TargetConfig, {"unroll_steps": 2.5}, "targets.unroll_steps"),
        (LearnerConfig, {"lr_schedule": "step"}, "learner.lr_schedule"),
        (LearnerConfig, {"learning_rate": 0}, "learner.learning_rate"),
        (LearnerConfig, {"q_coef": -1.0}, "learner.q_coef = -1.0"),
        (TestingConfig, {"temperature": -0.5}, "testing.temperature = -0.5"),
        (TestingConfig, {"random_move_prob": 1.5}, "testing.random_move_prob = 1.5 is invalid: allowed a number in [0.0, 1.0]"),
        (TestingConfig, {"random_moves": 1.5}, "testing.random_moves"),
    ],
)
def test_bad_values_name_the_field(cls, kwargs, message):
    with pytest.raises(ConfigError) as err:
        cls(**kwargs)
    assert message in str(err.value)


def test_from_dict_rejects_unknown_keys_listing_allowed():
    with pytest.raises(ConfigError, match="unknown key planner.num_sims: allowed keys are .*num_simulations"):
        from_dict(PlannerConfig, {"num_sims": 3}, owner="planner")


def test_from_dict_round_trip_and_coercion():
    cfg = from_dict(ModelConfig, {"kind": "mlp", "mlp_hidden": [32, 16], "support_size": 10})
    assert cfg.mlp_hidden == (32, 16)
    assert from_dict(ModelConfig, to_dict(cfg)) == cfg
    assert from_dict(LearnerConfig, {"learning_rate": 1}).learning_rate == 1.0
