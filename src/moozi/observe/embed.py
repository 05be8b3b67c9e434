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

Imagined paths (the thesis's map of hidden states shows them): from ``paths`` real positions spread over the
games, the dynamics is unrolled ``unroll`` steps under the actions actually taken; those hidden states are
mapped with the real ones (t-SNE has no out-of-sample transform, so they join its fit) and drawn as red lines
beside the real path of the same steps (black). ``drift`` says how far imagination strays: per unroll depth,
the mean distance between the imagined and the real hidden state, over the mean distance between consecutive
real states.
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


def imagined_states(model, params, start_hidden: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """The dynamics unrolled from real hidden states: ``start_hidden [P, ...]`` (as the representation gives
    them), ``actions [P, K]`` augmented actions -> ``[P, K, D]`` flattened imagined hidden states."""
    import jax
    import jax.numpy as jnp

    step = jax.jit(lambda h, a: model.recurrent_inference(params, h, a).hidden)
    h, out = jnp.asarray(start_hidden), []
    for k in range(actions.shape[1]):
        h = step(h, jnp.asarray(actions[:, k], jnp.int32))
        out.append(np.asarray(h).reshape(h.shape[0], -1))
    return np.stack(out, axis=1)


def path_starts(lengths: list[int], paths: int, unroll: int) -> list[tuple[int, int]]:
    """``(game, step)`` of up to ``paths`` starts spread over the games' positions that have ``unroll`` real
    steps after them."""
    candidates = [(b, t) for b, n in enumerate(lengths) for t in range(n - unroll)]
    return [candidates[i] for i in spread(len(candidates), paths)] if candidates and paths else []


def drift(imagined: np.ndarray, real: np.ndarray) -> list[float]:
    """Per depth k, mean ``|imagined_k - real_k|`` over the mean ``|real_k - real_(k-1)|`` (``real [P, K + 1, D]``
    holds each path's start): 0 is perfect imagination, 1 strays as far as one real step."""
    step = np.linalg.norm(np.diff(real, axis=1), axis=-1).mean()
    return [float(np.linalg.norm(imagined[:, k] - real[:, k + 1], axis=-1).mean() / max(step, 1e-12))
            for k in range(imagined.shape[1])]


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


def plot_map(points: np.ndarray, colour: np.ndarray, label: str, title: str, path: Path, lines=()) -> Path:
    """Scatter ``points [N, 2]`` coloured by ``colour [N]`` to a PNG; ``lines``: ``(xy [n, 2], colour)`` drawn over
    it (the imagined paths and the real ones beside them)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5))
    try:
        sc = ax.scatter(points[:, 0], points[:, 1], c=colour, s=8, cmap="viridis")
        for xy, c in lines:
            ax.plot(xy[:, 0], xy[:, 1], "-", color=c, lw=1.0, alpha=0.8)
            ax.plot(xy[1:, 0], xy[1:, 1], ".", color=c, ms=4)
            ax.plot(xy[:1, 0], xy[:1, 1], "o", mfc="none", mec="black", ms=6)
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
              out_dir=None, max_points: int = 2000, paths: int = 8, unroll: int | None = None) -> dict:
    """Play ``episodes`` test games, map the hidden states of at most ``max_points`` of their positions (spread
    evenly; 0: all) and ``paths`` imagined paths of ``unroll`` steps (default the run's unroll length); write the
    PNG and the projector files (every real position)."""
    import jax

    from moozi.eval.evaluate import play
    from moozi.run_dir import open_run, views_dir

    if colour_by not in ("value", "step"):
        raise ValueError(f"--colour {colour_by!r}: allowed value or step")
    if max_points < 0 or 0 < max_points < 4:
        raise ValueError(f"--max-points {max_points}: allowed 0 (every position) or an integer >= 4")
    if paths < 0 or (unroll is not None and unroll < 1):
        raise ValueError(f"--paths {paths} / --unroll {unroll}: allowed --paths >= 0 and --unroll >= 1")
    config, two_player, games, meta = play(run_dir, "random", episodes, seed, checkpoint, record_frames=True)
    run = open_run(run_dir, checkpoint, config)
    trajs = [g.trajectory for g in games]
    hidden = hidden_states(run.model, jax.device_put(run.params), run.spec, config.targets.history_length, trajs)
    steps = np.concatenate([np.arange(int(t.last) + 1) for t in trajs])
    values = np.concatenate([np.asarray(t.root_values)[:int(t.last) + 1] for t in trajs])
    rewards = np.concatenate([np.asarray(t.rewards)[:int(t.last) + 1] for t in trajs])
    episode = np.concatenate([np.full(int(t.last) + 1, i) for i, t in enumerate(trajs)])
    lengths = [int(t.last) + 1 for t in trajs]
    k = int(unroll or config.targets.unroll_steps)
    starts = path_starts(lengths, paths, k)
    offset = np.cumsum([0] + lengths[:-1])
    real_rows = np.array([[offset[b] + t + j for j in range(k + 1)] for b, t in starts], np.int64).reshape(-1, k + 1)
    mapped = np.union1d(spread(hidden.shape[0], max_points), real_rows.reshape(-1)).astype(np.int64)
    imagined = np.zeros((0, k, hidden.shape[1]), np.float32)
    if starts:
        shape = jax.eval_shape(lambda o: run.model.initial_inference(run.params, o).hidden,
                               jax.ShapeDtypeStruct((1, *run.model.observation_shape), np.float32)).shape[1:]
        taken = np.array([[int(trajs[b].actions[t + j]) for j in range(k)] for b, t in starts], np.int32)
        imagined = imagined_states(run.model, jax.device_put(run.params),
                                   hidden[real_rows[:, 0]].reshape(len(starts), *shape), taken)
    points_all = project_2d(np.concatenate([hidden[mapped], imagined.reshape(-1, hidden.shape[1])]), seed)
    points = points_all[:mapped.size]
    where = {int(r): i for i, r in enumerate(mapped)}
    lines = []
    for p in range(len(starts)):
        real_xy = points[[where[int(r)] for r in real_rows[p]]]
        dream = points_all[mapped.size + p * k: mapped.size + (p + 1) * k]
        lines += [(real_xy, "black"), (np.concatenate([real_xy[:1], dream]), "red")]
    updates = int(meta["counters"]["updates"])
    out_dir = Path(out_dir) if out_dir else views_dir(run_dir, "embed")
    colour = (values if colour_by == "value" else steps)[mapped]
    of = f"{mapped.size} of {hidden.shape[0]}" if mapped.size < hidden.shape[0] else f"{hidden.shape[0]}"
    paths_said = f"; {len(starts)} imagined paths of {k} steps (red) beside the real ones (black)" if starts else ""
    png = plot_map(points, colour, "search value v*" if colour_by == "value" else "step",
                   f"{config.env.name}: {of} positions of {len(trajs)} test games, update {updates:,}\n"
                   f"(t-SNE of {hidden.shape[1]}-d hidden states{paths_said})", out_dir / f"embed-{updates:09d}-{colour_by}.png",
                   lines)
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(out_dir / "projector")) as w:
        w.add_embedding(hidden, metadata=[[int(s), f"{v:.3f}", f"{r:.3f}", int(e)] for s, v, r, e in
                                          zip(steps, values, rewards, episode)],
                        metadata_header=["step", "value", "reward", "episode"], global_step=updates, tag="hidden")
    return {"png": str(png), "projector": str(out_dir / "projector"), "positions": int(hidden.shape[0]),
            "mapped": int(mapped.size), "imagined_paths": len(starts), "unroll": k,
            "drift": [round(d, 3) for d in drift(imagined, hidden[real_rows])] if starts else [],
            "hidden_size": int(hidden.shape[1]), "checkpoint": meta["path"]}
