"""Game frames as pictures: pure functions from one stored observation to an RGB image.

Which drawing a game gets follows from its spec, not from a list of games:

* MinAtar (10 x 10 binary object planes): each cell takes the colour of its
  highest set plane from MinAtar's own palette (seaborn's cubehelix with one
  colour per plane) on black, as MinAtar's GUI shows it.
* Pixels (``observation_dtype = uint8`` scaled by 1/255, Atari): grey, or RGB
  when there are 3 channels; with stacked frames, the newest one.
* Boards (two-player games): a grid with one disc per occupied cell, one
  colour per piece plane (:func:`board_planes`: OpenSpiel's empty and
  ``to_play`` planes are not pieces); a two-plane board (pgx: the mover's
  stones, then the opponent's) is turned into fixed colours per seat with
  ``to_play`` and the id of the player who moved first (pgx draws it per game).
* Vectors (``1 x 1 x C``): CartPole drawn as a cart and pole from its state
  (x, x', theta, theta'); any other vector as a bar plot of its values.

Images are ``[H, W, 3]`` uint8 numpy arrays, scaled up to about ``size``
pixels so that small boards stay readable in a GIF.
"""

from __future__ import annotations

import numpy as np

from moozi.envs.contract import EnvSpec

PLAYER_COLOURS = np.array([[230, 80, 60], [60, 120, 230], [90, 190, 90], [220, 180, 40]], np.uint8)
BOARD = np.array([222, 196, 140], np.uint8)
GRID = np.array([90, 70, 40], np.uint8)


def cubehelix(n: int) -> np.ndarray:
    """``[n, 3]`` uint8: seaborn's ``color_palette("cubehelix", n)``, MinAtar's GUI palette.

    That is matplotlib's ``cubehelix`` colormap (Green 2011; start 0.5, rotation
    -1.5, hue 1, gamma 1) sampled at ``n`` points evenly inside (0, 1).
    """
    x = np.linspace(0.0, 1.0, n + 2)[1:-1]
    phi = 2 * np.pi * (0.5 / 3 - 1.5 * x)
    a = x * (1 - x) / 2
    r = x + a * (-0.14861 * np.cos(phi) + 1.78277 * np.sin(phi))
    g = x + a * (-0.29227 * np.cos(phi) - 0.90649 * np.sin(phi))
    b = x + a * (1.97294 * np.cos(phi))
    return (np.clip(np.stack([r, g, b], -1), 0, 1) * 255).round().astype(np.uint8)


def kind_of(spec: EnvSpec) -> str:
    """``"minatar"``, ``"pixels"``, ``"board"``, ``"cartpole"`` or ``"vector"``: how :func:`render` draws it."""
    h, w, c = spec.observation_shape
    name = spec.name.lower()
    if h == 1 and w == 1:
        return "cartpole" if "cartpole" in name and c == 4 else "vector"
    if "minatar" in name:
        return "minatar"
    if spec.two_player:
        return "board"
    if spec.observation_dtype == "uint8" and spec.observation_scale < 1.0:
        return "pixels"
    return "minatar" if h <= 32 and w <= 32 else "pixels"  # small planes: object maps like MinAtar's


def _upscale(img: np.ndarray, size: int) -> np.ndarray:
    factor = max(1, size // max(img.shape[:2]))
    return np.repeat(np.repeat(img, factor, axis=0), factor, axis=1)


def _planes(frame: np.ndarray, size: int) -> np.ndarray:
    h, w, c = frame.shape
    palette = cubehelix(c)
    img = np.zeros((h, w, 3), np.uint8)
    for k in range(c):  # later planes drawn over earlier ones
        img[frame[..., k] > 0] = palette[k]
    return _upscale(img, size)


def _pixels(frame: np.ndarray, scale: float, size: int) -> np.ndarray:
    f = np.asarray(frame, np.float64) * (255.0 * scale if scale < 1.0 else 1.0)
    f = np.clip(f, 0, 255).astype(np.uint8)
    img = f[..., :3] if f.shape[-1] == 3 else np.repeat(f[..., -1:], 3, axis=-1)
    return _upscale(img, size)


# OpenSpiel's one-hot boards put the empty plane where each game chooses (read off pyspiel 2.0).
OPENSPIEL_EMPTY_PLANE = {"tic_tac_toe": 0, "connect_four": 2, "breakthrough": 2}


def board_planes(spec: EnvSpec, first_frame) -> list[int]:
    """The planes of a board observation that hold pieces, from a game's first frame.

    OpenSpiel two-player observations end with a ``to_play`` plane (not a piece).
    Where every cell has exactly one plane set (OpenSpiel: empty plus one plane
    per colour), the empty plane is left out: the game's known one, else the one
    covering most cells at the start. Otherwise (pgx) every plane is a piece plane.
    """
    frame = np.asarray(first_frame) > 0
    planes = list(range(frame.shape[-1]))
    if spec.name.startswith("openspiel:") and spec.two_player and len(planes) > 1:
        planes = planes[:-1]
    if len(planes) >= 3 and bool(np.all(frame[..., planes].sum(-1) == 1)):
        game = spec.name.split(":", 1)[-1].split("(", 1)[0]
        empty = OPENSPIEL_EMPTY_PLANE.get(game)
        if empty is None or empty not in planes:
            empty = planes[int(np.argmax(frame[..., planes].sum(axis=(0, 1))))]
        planes.remove(empty)
    return planes


def _board(frame: np.ndarray, to_play: int, size: int, planes: list[int], first_player: int) -> np.ndarray:
    h, w, _ = frame.shape
    occupied = frame > 0
    if len(planes) == 2 and to_play != first_player and planes == [0, 1]:  # pgx: the first plane is the mover's
        planes = [1, 0]  # the first colour stays with the first mover
    cell = max(8, size // max(h, w))
    img = np.empty((h * cell, w * cell, 3), np.uint8)
    img[:] = BOARD
    img[::cell, :] = GRID
    img[:, ::cell] = GRID
    img[-1, :] = GRID
    img[:, -1] = GRID
    yy, xx = np.mgrid[0:cell, 0:cell]
    disc = (yy - cell / 2 + 0.5) ** 2 + (xx - cell / 2 + 0.5) ** 2 <= (0.38 * cell) ** 2
    for colour_index, k in enumerate(planes):
        colour = PLAYER_COLOURS[colour_index % len(PLAYER_COLOURS)]
        for i, j in zip(*np.nonzero(occupied[..., k])):
            img[i * cell:(i + 1) * cell, j * cell:(j + 1) * cell][disc] = colour
    return img


def _cartpole(state: np.ndarray, size: int) -> np.ndarray:
    """Cart at x in [-2.4, 2.4] on a track, pole at angle theta (radians from upright), as gymnasium draws it."""
    width, height = size * 2, size
    img = np.full((height, width, 3), 255, np.uint8)
    track_y = int(height * 0.75)
    img[track_y, :] = 0
    x, theta = float(state[0]), float(state[2])
    cx = int((x / 4.8 + 0.5) * width)
    cw, ch = max(width // 10, 4), max(height // 12, 3)
    img[max(track_y - ch, 0):track_y, max(cx - cw // 2, 0):max(min(cx + cw // 2, width), 0)] = 40
    length = height * 0.55
    t = np.linspace(0.0, 1.0, int(length))
    px = (cx + t * length * np.sin(theta)).astype(int)
    py = (track_y - ch - t * length * np.cos(theta)).astype(int)
    for dx in (-2, -1, 0, 1, 2):
        ok = (px + dx >= 0) & (px + dx < width) & (py >= 0) & (py < height)
        img[py[ok], px[ok] + dx] = (200, 130, 80)
    return img


def _bars(values: np.ndarray, size: int) -> np.ndarray:
    n = values.size
    width, height = max(size, 24 * n), size
    img = np.full((height, width, 3), 255, np.uint8)
    mid = height // 2
    img[mid, :] = 0
    top = max(float(np.max(np.abs(values))), 1e-9)
    bar = width // n
    for i, v in enumerate(values):
        rows = int(abs(v) / top * (mid - 2))
        sl = slice(mid - rows, mid) if v >= 0 else slice(mid + 1, mid + 1 + rows)
        img[sl, i * bar + 2:(i + 1) * bar - 2] = (70, 110, 200)
    return img


def render(spec: EnvSpec, frame, to_play: int = 0, size: int = 160, planes: list[int] | None = None,
           first_player: int = 0) -> np.ndarray:
    """One stored observation (``spec.observation_shape``, storage dtype) as an ``[H, W, 3]`` uint8 image.

    ``planes``: boards only, the piece planes (:func:`board_planes` of the game's
    first frame; by default worked out from this frame). ``first_player``: boards, the player id that moved
    first in this game (its pieces take the first colour).
    """
    frame = np.asarray(frame)
    if frame.shape != tuple(spec.observation_shape):
        raise ValueError(f"frame of shape {frame.shape} does not fit {spec.name}'s observation_shape "
                         f"{tuple(spec.observation_shape)}")
    kind = kind_of(spec)
    if kind == "cartpole":
        return _cartpole(frame.reshape(-1) * spec.observation_scale, size)
    if kind == "vector":
        return _bars(frame.reshape(-1).astype(np.float64) * spec.observation_scale, size)
    if kind == "pixels":
        return _pixels(frame, spec.observation_scale if spec.observation_dtype == "uint8" else 1.0, size)
    if kind == "board":
        return _board(frame, int(to_play), size, board_planes(spec, frame) if planes is None else list(planes),
                      int(first_player))
    return _planes(frame, size)



def render_png(spec: EnvSpec, frame, to_play: int = 0, size: int = 160) -> bytes | None:
    """One observation drawn (:func:`render`) as PNG bytes; None where the game cannot be drawn."""
    import io

    from PIL import Image

    try:
        img = render(spec, frame, to_play, size=size)
    except ValueError:
        return None
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return buf.getvalue()
