"""The curated public API is pinned: a change to it is a deliberate API change."""

import subprocess
import sys

import moozi

PINNED = [
    "ActingConfig", "Actor", "Config", "ConfigError", "EnvConfig", "EnvSpec", "Episode", "HostEnv", "Learner",
    "LearnerConfig", "ModelConfig", "OutputConfig", "PlannerConfig", "ReplayBuffer", "ReplayConfig", "ReplayEnvPool",
    "ReplayError", "ScheduleConfig", "TargetConfig", "TestingConfig", "TimeStep", "Trainer", "Trajectory",
    "apply_overrides", "build_model", "config_from_dict", "evaluate", "list_envs", "load_preset", "make_actor",
    "make_env", "make_pool", "plan", "play_games", "register", "__version__",
]


def test_public_names_are_pinned_and_resolve():
    assert moozi.__all__ == PINNED
    for name in PINNED:
        assert getattr(moozi, name) is not None, name


def test_importing_moozi_does_no_work():
    code = "import sys, moozi; print(any(m.split('.')[0] in ('jax', 'flax', 'numpy') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
