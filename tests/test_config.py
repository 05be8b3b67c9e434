"""Config validation: bad values and unknown keys name the field."""

import pytest

from moozi.config import Config, ConfigError, LearnerConfig, ModelConfig, PlannerConfig, TargetConfig, TestingConfig, from_dict, to_dict


@pytest.mark.parametrize(
    "cls, kwargs, message",
    [
        (ModelConfig, {"kind": "transformer"}, "model.kind = 'transformer' is invalid: allowed one of 'resnet', 'mlp'"),
        (ModelConfig, {"support_size": 0}, "model.support_size"),
        (ModelConfig, {"mlp_hidden": (64, -1)}, "model.mlp_hidden"),
        (ModelConfig, {"mover_relative": 1}, "model.mover_relative = 1 is invalid: allowed true or false"),
        (PlannerConfig, {"kind": "alphabeta"}, "planner.kind"),
        (PlannerConfig, {"num_simulations": 0}, "planner.num_simulations = 0"),
        (PlannerConfig, {"dirichlet_fraction": 1.5}, "planner.dirichlet_fraction"),
        (PlannerConfig, {"value_scale": 0}, "planner.value_scale = 0 is invalid"),
        (PlannerConfig, {"rescale_values": "no"}, "planner.rescale_values"),
        (TargetConfig, {"discount": 1.2}, "targets.discount = 1.2 is invalid: allowed a number in [0.0, 1.0]"),
        (TargetConfig, {"unroll_steps": 2.5}, "targets.unroll_steps"),
        (LearnerConfig, {"lr_schedule": "step"}, "learner.lr_schedule"),
        (LearnerConfig, {"learning_rate": 0}, "learner.learning_rate"),
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


def _numeric_keys():
    """Every number-valued key of every section, with its default (``section.key``, default)."""
    import dataclasses

    from moozi.config import Config

    config = Config()
    for section in dataclasses.fields(Config):
        value = getattr(config, section.name)
        if not dataclasses.is_dataclass(value):
            continue
        for f in dataclasses.fields(value):
            default = getattr(value, f.name)
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                yield f"{section.name}.{f.name}", default


def test_numbers_as_people_write_them_in_every_numeric_key():
    """``3e-4``, ``1E-3``, ``5e5``: PyYAML alone reads them as strings; every numeric key takes its default
    written with an exponent (and ints as ``Ne0``) and reads back the same number."""
    from moozi.config import apply_overrides, config_from_dict

    keys = list(_numeric_keys())
    assert len(keys) > 60
    for key, default in keys:
        text = f"{default}e0" if isinstance(default, int) else f"{default:E}"
        config = config_from_dict(apply_overrides({}, [f"{key}={text}"]))
        section, name = key.split(".")
        assert getattr(getattr(config, section), name) == pytest.approx(default), (key, text)
    c = config_from_dict(apply_overrides({}, ["learner.learning_rate=3e-4", "replay.capacity=5e5",
                                             "learner.max_grad_norm=1e30"]))
    assert (c.learner.learning_rate, c.replay.capacity, c.learner.max_grad_norm) == (3e-4, 500_000, 1e30)
    assert isinstance(c.replay.capacity, int)
    with pytest.raises(ConfigError, match="replay.capacity"):  # not an integer: refused, not rounded
        config_from_dict(apply_overrides({}, ["replay.capacity=2.5e-1"]))


def test_removed_research_switches_are_answered_with_their_card(tmp_path):
    """The graduation rule (docs/architecture.md §7): a switch no preset adopted leaves the product. A run folder
    written before holds it at its neutral value and still loads; any other value, in a config or an override,
    is refused naming the card that measured it."""
    from moozi.config import apply_overrides, config_from_dict, to_dict
    from moozi.config.loading import REMOVED_KEYS

    old = to_dict(Config())
    for key, (neutral, _) in REMOVED_KEYS.items():
        section, name = key.split(".")
        old[section][name] = neutral
    assert config_from_dict(old) == Config()  # an old run's config.yaml: the same run
    assert len(REMOVED_KEYS) == 11
    for key in REMOVED_KEYS:
        section, name = key.split(".")
        assert name not in to_dict(Config())[section]
    with pytest.raises(ConfigError, match=r"learner.q_coef = 0.5: removed .* see docs/results/minatar-60min"):
        config_from_dict({"learner": {"q_coef": 0.5}})
    with pytest.raises(ConfigError, match=r"learner.ema_decay = 0.999: removed .* see docs/results/learning/"
                                          r"cartpole-ema0.999-probe/README.md .*commit 08103b7"):
        config_from_dict({"learner": {"ema_decay": 0.999}})
    with pytest.raises(ConfigError, match=r"model.dynamics_residual = True: removed"):
        config_from_dict(apply_overrides(to_dict(Config()), ["model.dynamics_residual=true"]))
