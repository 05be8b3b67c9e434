"""Episodes as animated GIFs: each frame drawn by :mod:`moozi.observe.render` with a caption.

The caption of step ``t`` says what the agent saw and did there: the step, the
reward that arrived with this observation (``r_t``), the search value ``v*_t``
and the action chosen (``a_t``, the game's own action index); two-player games
also say whose move it is (an opponent's move shows its action only). Pillow writes the GIF; TensorBoard gets the same
frames as an image strip (:func:`tensorboard_strip`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from moozi.envs.contract import EnvSpec
from moozi.observe.render import board_planes, kind_of, render
from moozi.types import Trajectory

CAPTION_PX = 30


def caption(spec: EnvSpec, traj: Trajectory, t: int, agent_seat: int | None = None) -> list[str]:
    """The two caption lines of step ``t`` (pure; see the module doc)."""
    last = int(traj.last)
    reward = float(np.asarray(traj.rewards)[t])
    value = float(np.asarray(traj.root_values)[t])
    action = int(np.asarray(traj.actions)[t]) - 1  # stored actions are augmented: 0 is the dummy
    head = f"step {t}/{last}  r {reward:+.3g}"
    searched = True
    if spec.two_player:
        mover = int(np.asarray(traj.to_play)[t])
        who = "" if agent_seat is None else (" (agent)" if mover == agent_seat else " (opponent)")
        head += f"  player {mover}{who}"
        searched = agent_seat is None or mover == agent_seat  # the opponent's moves carry no search of ours
    tail = "end of episode" if t == last else (f"v* {value:+.3g}  action {action}" if searched else f"action {action}")
    return [head, tail]


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
    for t in range(last + 1):
        img = render(spec, frames[t], int(to_play[t]), size, planes)
        h, w = img.shape[:2]
        w = max(w, 200)
        canvas = Image.new("RGB", (w, h + CAPTION_PX), (255, 255, 255))
        canvas.paste(Image.fromarray(img), ((w - img.shape[1]) // 2, 0))
        draw = ImageDraw.Draw(canvas)
        for i, line in enumerate(caption(spec, traj, t, agent_seat)):
            draw.text((4, h + 2 + 13 * i), line, fill=(0, 0, 0), font=font)
        out.append(np.asarray(canvas))
    return out


def write_gif(path: Path | str, frames: list, fps: float = 8.0) -> Path:
    """Write ``frames`` (same-sized ``[H, W, 3]`` uint8) as a looping GIF; returns the path."""
    from PIL import Image

    if not frames:
        raise ValueError("no frames to write")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames]
    tmp = path.with_name(path.name + ".tmp")
    images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    tmp.replace(path)  # a reader never sees half a GIF
    return path


def tensorboard_strip(frames: list, max_frames: int = 16) -> np.ndarray:
    """``[H, W * k, 3]`` uint8: up to ``max_frames`` frames side by side, evenly spaced over the episode
    (TensorBoard's image dashboard shows a still; the GIF beside the run has every frame)."""
    idx = np.unique(np.linspace(0, len(frames) - 1, min(max_frames, len(frames))).round().astype(int))
    return np.concatenate([np.asarray(frames[i], np.uint8) for i in idx], axis=1)


def watch_run(run_dir, episodes: int = 1, opponent: str = "random", seed: int = 0, checkpoint: str = "latest",
              out=None, fps: float = 4.0, max_frames: int = 0) -> dict:
    """``moozi watch``: play ``episodes`` greedy games of a run's checkpoint and write them as one GIF.

    Returns the GIF's path, the checkpoint, the frame count and each game's return.
    """
    from moozi.eval.evaluate import play
    from moozi.workers import agent_return

    config, two_player, games, meta, spec = play(run_dir, opponent, episodes, seed, checkpoint, record_frames=True,
                                                 with_spec=True)
    frames = []
    for g in games:
        frames += episode_frames(spec, g.trajectory, g.agent_seat if two_player else None)
    if max_frames:
        frames = frames[:max_frames]
    out = Path(out) if out else Path(run_dir) / "gifs" / f"watch-{meta['counters']['updates']:09d}.gif"
    write_gif(out, frames, fps=fps)
    returns = [float(agent_return(g.trajectory, g.agent_seat, two_player)) for g in games]
    return {"gif": str(out), "checkpoint": meta["path"], "episodes": len(games), "frames": len(frames),
            "returns": returns, "return_mean": float(np.mean(returns))}
