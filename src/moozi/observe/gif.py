"""Episodes as animated GIFs: each frame drawn by :mod:`moozi.observe.render` with a caption.

The caption of step ``t`` says what happened there: the step, the search value ``v*_t`` and the action chosen
(``a_t``, the game's own action index), and the reward that arrived with this observation (``r_t``). In a
two-player game it also says who is to move and whose reward ``r_t`` is (the player who made the last move);
players are named by seat, the order of play (:func:`moozi.workers.seats`), as agent and opponent when the
agent's seat is known, and an opponent's move shows its action only. Pieces keep one colour per seat.
Pillow writes the GIF; TensorBoard gets the same frames as an image strip (:func:`tensorboard_strip`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from moozi.envs.contract import EnvSpec
from moozi.observe.render import board_planes, kind_of, render
from moozi.types import Trajectory
from moozi.workers import seats

LINE_PX = 13
SEAT_NAMES = ("first player", "second player")


def caption(spec: EnvSpec, traj: Trajectory, t: int, agent_seat: int | None = None) -> list[str]:
    """The caption lines of step ``t`` (pure; see the module doc): two for one-player games, three for two."""
    last = int(traj.last)
    reward = float(np.asarray(traj.rewards)[t])
    value = float(np.asarray(traj.root_values)[t])
    action = int(np.asarray(traj.actions)[t]) - 1  # stored actions are augmented: 0 is the dummy
    searched = f"v* {value:+.3f}  action {action}" if np.isfinite(value) else f"action {action}"  # NaN: not kept
    if not spec.two_player:
        return [f"step {t}/{last}  r {reward:+.3g}", "end of episode" if t == last else searched]
    seat = seats(traj)

    def name(s: int) -> str:
        return SEAT_NAMES[s] if agent_seat is None else ("agent" if s == agent_seat else "opponent")

    if t == last:
        lines = [f"step {t}/{last}  end of episode", ""]
    else:  # the opponent's moves carry no search of ours
        ours = agent_seat is None or seat[t] == agent_seat
        lines = [f"step {t}/{last}  {name(seat[t])} to move", searched if ours else f"action {action}"]
    lines.append(f"r {reward:+.3g} to {name(seat[t - 1])}" if t > 0 else "")
    return lines


def _font():
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=11)
    except TypeError:  # Pillow without FreeType sizes
        return ImageFont.load_default()


def episode_frames(spec: EnvSpec, traj: Trajectory, agent_seat: int | None = None, size: int = 160) -> list:
    """Captioned ``[H, W, 3]`` uint8 frames of a whole episode (frames recorded by the actor)."""
    from PIL import Image, ImageDraw

    frames = np.asarray(traj.frames)
    last = int(traj.last)
    if frames.shape[0] <= last or frames.shape[1:] != tuple(spec.observation_shape):
        raise ValueError(f"the episode has frames of shape {frames.shape}, not {last + 1} observations of "
                         f"{tuple(spec.observation_shape)}: play it with record_frames=True")
    font = _font()
    out = []
    to_play = np.asarray(traj.to_play)
    planes = board_planes(spec, frames[0]) if kind_of(spec) == "board" else None  # fixed for the whole game
    caption_px = LINE_PX * (3 if spec.two_player else 2) + 4
    for t in range(last + 1):
        img = render(spec, frames[t], int(to_play[t]), size, planes, first_player=int(to_play[0]))
        h, w = img.shape[:2]
        w = max(w, 200)
        canvas = Image.new("RGB", (w, h + caption_px), (255, 255, 255))
        canvas.paste(Image.fromarray(img), ((w - img.shape[1]) // 2, 0))
        draw = ImageDraw.Draw(canvas)
        for i, line in enumerate(caption(spec, traj, t, agent_seat)):
            draw.text((4, h + 2 + LINE_PX * i), line, fill=(0, 0, 0), font=font)
        out.append(np.asarray(canvas))
    return out


def write_gif(path: Path | str, frames: list, fps: float = 8.0) -> Path:
    """Write ``frames`` (same-sized ``[H, W, 3]`` uint8) as a looping GIF; returns the path."""
    from PIL import Image

    from moozi.files import write_atomic

    if not frames:
        raise ValueError("no frames to write")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames]
    return write_atomic(path, lambda tmp: images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                                                         duration=int(1000 / fps), loop=0), "the GIF")


def tensorboard_strip(frames: list, max_frames: int = 16) -> np.ndarray:
    """``[H, W * k, 3]`` uint8: up to ``max_frames`` frames side by side, evenly spaced over the episode
    (TensorBoard's image dashboard shows a still; the GIF beside the run has every frame)."""
    idx = np.unique(np.linspace(0, len(frames) - 1, min(max_frames, len(frames))).round().astype(int))
    return np.concatenate([np.asarray(frames[i], np.uint8) for i in idx], axis=1)


def watch_run(run_dir, episodes: int = 1, opponent: str = "random", seed: int = 0, checkpoint: str = "latest",
              out=None, fps: float = 4.0, max_frames: int = 0) -> dict:
    """``moozi watch``: play ``episodes`` greedy games of a run's checkpoint and write them as one GIF.

    ``opponent`` (two-player games): ``random`` and ``perfect`` play inside the test actor; any other player
    string (``os-mcts-100``, another ``RUN``, ``gtp:COMMAND``, ...) plays through the arena
    (:func:`moozi.eval.evaluate.play_in_arena`: the agent in each seat in turn, no search value in the
    caption). Returns the GIF's path, the checkpoint, the frame count and each game's return.
    """
    from moozi.eval.evaluate import play, play_in_arena
    from moozi.eval.perfect import OPPONENTS
    from moozi.run_dir import load_run_config, views_dir
    from moozi.workers import agent_return

    arena = opponent not in OPPONENTS and _two_player(load_run_config(run_dir))
    if arena:
        config, two_player, games, meta, spec, scores = play_in_arena(run_dir, opponent, episodes, seed, checkpoint)
        returns = [2.0 * s - 1.0 for s in scores]  # win 1, draw 0, loss -1 (a forfeit counts)
    else:
        config, two_player, games, meta, spec = play(run_dir, opponent, episodes, seed, checkpoint,
                                                     record_frames=True, with_spec=True)
        returns = [float(agent_return(g.trajectory, g.agent_seat, two_player)) for g in games]
    frames = []
    for g in games:
        frames += episode_frames(spec, g.trajectory, g.agent_seat if two_player else None)
    if max_frames:
        frames = frames[:max_frames]
    out = Path(out) if out else views_dir(run_dir, "gifs") / f"watch-{meta['counters']['updates']:09d}.gif"
    write_gif(out, frames, fps=fps)
    return {"gif": str(out), "checkpoint": meta["path"], "episodes": len(games), "frames": len(frames),
            "opponent": opponent if two_player else None, "returns": returns, "return_mean": float(np.mean(returns))}


def _two_player(config) -> bool:
    from moozi.parts import build_parts

    env, _ = build_parts(config)
    try:
        return bool(env.spec.two_player)
    finally:
        env.close()
