"""Hidden-state maps: the representation's hidden states over test games, projected to 2-D.

``moozi embed RUN`` plays test games (the run's test planner, greedy), feeds
every position's stacked history to the representation network, and projects
the hidden states with t-SNE (scikit-learn, the ``viz`` extra) to a PNG
coloured by the search value v* (or by the step), like the thesis's maps. It
also writes a TensorBoard projector file (``RUN/embed/projector``) holding
the raw hidden states of every position with step, value, reward and episode
as metadata, for TensorBoard's own PCA / t-SNE / UMAP views.

t-SNE's cost grows faster than the positions (a trained MinAtar agent's 8 games
of up to 1000 moves are 8,000 positions of 1,600 numbers: about 35 s of t-SNE
alone on 2 cores), so the map is drawn from at most ``max_points`` positions
spread evenly over all the games (default 2,000; 0: all), each first reduced to
its 50 principal components (:func:`project_2d`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def hidden_states(model, params, spec, history_length: int, trajectories) -> np.ndarray:
    """``[sum of (T_i + 1), D]`` flattened hidden states of every position of ``trajectories`` (frames recorded)."""
    import jax
    import jax.numpy as jnp

    from moozi.model.history import history_init, history_observation, history_push

    A = model.num_actions
    B = len(trajectories)
    lengths = [int(t.last) + 1 for t in trajectories]
    T = max(lengths)
    scale = spec.observation_scale
    frames = np.zeros((T, B, *spec.observation_shape), np.float32)
    actions = np.zeros((T, B), np.int32)
    for b, t in enumerate(trajectories):
        frames[:lengths[b], b] = np.asarray(t.frames, np.float32)[:lengths[b]] * scale
        actions[:lengths[b], b] = np.asarray(t.actions)[:lengths[b]]

    @jax.jit
    def step(h, frame, prev, first):
        h = history_push(h, frame, prev, first)
        hidden = model.initial_inference(params, history_observation(h, A)).hidden
        return h, hidden.reshape(hidden.shape[0], -1)

    h = history_init(B, spec.observation_shape, history_length)
    out = []
    for t in range(T):
        prev = jnp.asarray(actions[t - 1] if t else np.zeros(B, np.int32))
        h, hid = step(h, jnp.asarray(frames[t]), prev, jnp.full((B,), t == 0))
        out.append(np.asarray(hid))
    hidden = np.stack(out)  # [T, B, D]
    return np.concatenate([hidden[:lengths[b], b] for b in range(B)])


def spread(n: int, k: int) -> np.ndarray:
    """``[min(n, k)]`` sorted indices spread evenly over ``range(n)`` (all of them when ``k`` is 0 or ``k >= n``)."""
    if k <= 0 or k >= n:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))


def project_2d(x: np.ndarray, seed: int = 0, components: int = 50) -> np.ndarray:
    """``[N, D]`` -> ``[N, 2]`` with scikit-learn's t-SNE (perplexity capped for small N), after PCA to
    ``components`` dimensions where ``D`` is larger (scikit-learn's advice: cheaper neighbours, less noise)."""
    try:
        from sklearn.decomposition import PCA
        from sklearn.manifold import TSNE
    except ImportError as err:
        raise ImportError("moozi embed needs scikit-learn: pip install 'moozi[viz]'") from err
    n = x.shape[0]
    if n < 4:
        raise ValueError(f"{n} positions are too few to map: play more --episodes")
    x = np.asarray(x, np.float64)
    if x.shape[1] > components and n > components:
        x = PCA(components, random_state=seed).fit_transform(x)
    perplexity = float(min(30.0, max(2.0, (n - 1) / 3)))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed, n_jobs=-1).fit_transform(x)


def plot_map(points: np.ndarray, colour: np.ndarray, label: str, title: str, path: Path) -> Path:
    """Scatter ``points [N, 2]`` coloured by ``colour [N]`` to a PNG."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5))
    try:
        sc = ax.scatter(points[:, 0], points[:, 1], c=colour, s=8, cmap="viridis")
        fig.colorbar(sc, ax=ax, label=label)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def embed_run(run_dir, episodes: int = 8, colour_by: str = "value", checkpoint: str = "latest", seed: int = 0,
              out_dir=None, max_points: int = 2000) -> dict:
    """Play ``episodes`` test games, map the hidden states of at most ``max_points`` of their positions (spread
    evenly; 0: all); write the PNG and the projector files (every position)."""
    import jax

    from moozi.eval.evaluate import play
    from moozi.run_dir import open_run, views_dir

    if colour_by not in ("value", "step"):
        raise ValueError(f"--colour {colour_by!r}: allowed value or step")
    if max_points < 0 or 0 < max_points < 4:
        raise ValueError(f"--max-points {max_points}: allowed 0 (every position) or an integer >= 4")
    config, two_player, games, meta = play(run_dir, "random", episodes, seed, checkpoint, record_frames=True)
    run = open_run(run_dir, checkpoint, config)
    trajs = [g.trajectory for g in games]
    hidden = hidden_states(run.model, jax.device_put(run.params), run.spec, config.targets.history_length, trajs)
    steps = np.concatenate([np.arange(int(t.last) + 1) for t in trajs])
    values = np.concatenate([np.asarray(t.root_values)[:int(t.last) + 1] for t in trajs])
    rewards = np.concatenate([np.asarray(t.rewards)[:int(t.last) + 1] for t in trajs])
    episode = np.concatenate([np.full(int(t.last) + 1, i) for i, t in enumerate(trajs)])
    mapped = spread(hidden.shape[0], max_points)
    points = project_2d(hidden[mapped], seed)
    updates = int(meta["counters"]["updates"])
    out_dir = Path(out_dir) if out_dir else views_dir(run_dir, "embed")
    colour = (values if colour_by == "value" else steps)[mapped]
    of = f"{mapped.size} of {hidden.shape[0]}" if mapped.size < hidden.shape[0] else f"{hidden.shape[0]}"
    png = plot_map(points, colour, "search value v*" if colour_by == "value" else "step",
                   f"{config.env.name}: {of} positions of {len(trajs)} test games, update {updates:,} "
                   f"(t-SNE of {hidden.shape[1]}-d hidden states)", out_dir / f"embed-{updates:09d}-{colour_by}.png")
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(out_dir / "projector")) as w:
        w.add_embedding(hidden, metadata=[[int(s), f"{v:.3f}", f"{r:.3f}", int(e)] for s, v, r, e in
                                          zip(steps, values, rewards, episode)],
                        metadata_header=["step", "value", "reward", "episode"], global_step=updates, tag="hidden")
    return {"png": str(png), "projector": str(out_dir / "projector"), "positions": int(hidden.shape[0]),
            "mapped": int(mapped.size),
            "hidden_size": int(hidden.shape[1]), "checkpoint": meta["path"]}
