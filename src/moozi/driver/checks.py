"""The run's checks: a config the game or the settings cannot run is refused before anything is written, with
a ConfigError naming the field and what to change."""

from __future__ import annotations

from moozi.config import Config, ConfigError
from moozi.learner import training_symmetries


def check_run(config: Config, spec) -> None:
    """Refuse a config that cannot run on the game ``spec`` before anything is written (a ConfigError naming the
    field and what to change)."""
    cap = spec.max_episode_steps
    if cap is not None and config.replay.capacity < cap + 1:
        raise ConfigError(f"replay.capacity = {config.replay.capacity} cannot hold one episode of {spec.name} "
                          f"({cap} steps, the game's max_episode_steps, plus its last step): raise "
                          "replay.capacity or cap episodes with env.kwargs.max_episode_steps")
    if config.reanalyze.fraction > 0 and config.distributed.reanalyze_workers < 1:
        raise ConfigError("reanalyze.fraction > 0 needs distributed.reanalyze_workers >= 1")
    check_judges(config, spec)
    training_symmetries(config.learner, spec)  # a game without symmetries is refused before any work


def check_judges(config, spec) -> None:
    """Refuse a tournament, gate, grading or ``acting.play_best`` the run's game or settings cannot have (a
    ConfigError naming the field)."""
    if config.tournament.every_checkpoints and not spec.two_player:
        from moozi.eval.players.registry import is_builtin, parse_player

        built_in = [a for a in config.tournament.anchors if is_builtin(parse_player(a)[0])]
        if built_in:
            raise ConfigError(f"tournament.anchors = {list(config.tournament.anchors)}: {spec.name} is single-player, "
                              f"judged between trained agents; {built_in} are not. Allowed for it: agent files, "
                              "zoo:NAME, run folders, or [] (earlier checkpoints only)")
    if config.gating.every_checkpoints and not spec.two_player and config.gating.method != "fixed":
        raise ConfigError(f"gating.method = {config.gating.method!r}: {spec.name} is single-player, gated on the paired "
                          "difference of returns over 2 x gating.max_pairs games (accepted when its 95% interval lies "
                          "above 0). Allowed for it: fixed")
    if config.grading.every_checkpoints:
        from moozi.eval.solver import CONNECT_FOUR_GAMES

        if config.env.name not in CONNECT_FOUR_GAMES:
            raise ConfigError(f"grading.every_checkpoints > 0 grades connect four ({', '.join(CONNECT_FOUR_GAMES)}), "
                              f"not {config.env.name}. Set grading.every_checkpoints = 0")
    if config.grading.keep_best and config.gating.every_checkpoints:
        raise ConfigError("grading.keep_best with gating.every_checkpoints > 0: both would choose checkpoints/best; "
                          "set one of them off")
    if config.acting.play_best and not (config.gating.every_checkpoints or config.grading.keep_best):
        raise ConfigError("acting.play_best plays the best network, but nothing chooses it by strength: set "
                          "gating.every_checkpoints > 0 or grading.keep_best = true (with grading.every_checkpoints)")
