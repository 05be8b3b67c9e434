"""What the agent is: the network, its search, its training targets and its learner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from moozi.validate import boolean as _boolean
from moozi.validate import choice as _choice
from moozi.validate import fail as _fail
from moozi.validate import nonneg_int as _nonneg_int
from moozi.validate import number_in as _number_in
from moozi.validate import positive_int as _positive_int


@dataclass(frozen=True)
class ModelConfig:
    """Network family and sizes (docs/architecture.md §5).

    kind: ``"resnet"`` (image observations, thesis layout) or ``"mlp"`` (vector
      observations, tiny tests).
    channels: residual trunk channels (thesis 32).
    repr_blocks / dyn_blocks: residual blocks in representation / dynamics (thesis 6).
    pred_blocks / proj_blocks: residual blocks in prediction / projection (thesis 1).
    head_hidden: width of the dense layer in each head (thesis 128).
    mlp_hidden: widths of MLP trunks; ``mlp_embedding``: MLP hidden-state size.
    support_size: categorical support is the integers ``[-S, S]`` (thesis 30).
    value_transform: ``"phi"`` (thesis: two-hot of phi(x)) or ``"identity"``
      (two-hot of x itself; for board games with outcomes in [-1, 1], S = 1).
    normalize_hidden: min-max scale hidden states to [0, 1] (MuZero).
    dynamics: what the search steps: ``"learned"`` (MuZero: the dynamics
      network) or ``"simulator"`` (AlphaZero mode, JAX-native games only: the
      game's own simulator; only representation and prediction are trained,
      there are no dynamics, reward or consistency losses, and
      ``targets.unroll_steps`` is 0).
    mover_relative: relabel two-player boards so the player to move is
      always player 0 before the representation (both seats then share what
      is learnt; :mod:`moozi.model.perspective`). Only for games that declare
      their piece planes (``EnvSpec.player_planes``: OpenSpiel tic-tac-toe and
      connect four; pgx boards are mover-relative already).
    dynamics_action: how a move enters the ``resnet`` dynamics. ``"planes"``
      (the thesis's): one-hot action planes stacked on the state, so a move
      adds the same bias at every cell of the first convolution, and anything
      a move does differently near a car must come out of the ReLUs after
      it. ``"kernels"``: each move has a 3x3 first convolution of its own
      (multiplicative conditioning, as in Oh et al. 2015's action-conditional
      video prediction), so a move can shift what it moves (Freeway's chicken
      a row up) and read what lies there in one layer.
    chance_outcomes: 0 (MuZero: deterministic dynamics) or M >= 2: Stochastic
      MuZero (Antonoglou et al. 2022; :mod:`moozi.model.stochastic`): a move
      leads to an afterstate (its value Q and a prior sigma over M chance
      outcomes), an encoder names the outcome that happened as one of M codes
      (one-hot, straight-through), and the dynamics go from the afterstate and
      the code to the next state and its reward. Searched with mctx's
      ``stochastic_muzero_policy`` (PUCT only). Games with chance (2048,
      OpenSpiel's chance nodes, sticky actions) need it.
    chance_blocks: residual blocks of the chance dynamics (afterstate + code
      -> state); the afterstate dynamics keep ``dyn_blocks``.
    downsample: how the ``resnet`` representation first reads an observation:
      ``"none"`` (a 1x1 convolution: the hidden state keeps the frame's
      H x W, right for MinAtar's 10 x 10 and boards) or ``"atari"``
      (MuZero's Atari stem: two stride-2 convolutions and two stride-2
      poolings with residual blocks, H x W -> ceil(H/16) x ceil(W/16), 84 x 84
      -> 6 x 6), so dynamics, prediction and the heads run on 36 cells.
    compute_dtype: the dtype the convolutions and dense layers multiply in:
      ``"float32"`` or ``"bfloat16"`` (mixed precision for GPUs and TPUs:
      parameters, optimizer state, LayerNorm statistics, the residual stream
      and everything that leaves the model stay float32; what it was measured
      to change: docs/results/gpu-prep/bf16). Checkpoints do not change.
    """

    kind: Literal["resnet", "mlp"] = "resnet"
    channels: int = 32
    repr_blocks: int = 6
    dyn_blocks: int = 6
    pred_blocks: int = 1
    proj_blocks: int = 1
    head_hidden: int = 128
    mlp_hidden: tuple[int, ...] = (128, 128)
    mlp_embedding: int = 64
    support_size: int = 30
    value_transform: Literal["phi", "identity"] = "phi"
    normalize_hidden: bool = True
    dynamics: Literal["learned", "simulator"] = "learned"
    mover_relative: bool = False
    dynamics_action: Literal["planes", "kernels"] = "planes"
    chance_outcomes: int = 0
    chance_blocks: int = 1
    downsample: Literal["none", "atari"] = "none"
    compute_dtype: Literal["float32", "bfloat16"] = "float32"

    def __post_init__(self):
        o = "model"
        _choice(o, "downsample", self.downsample, ("none", "atari"))
        _choice(o, "compute_dtype", self.compute_dtype, ("float32", "bfloat16"))
        if self.downsample != "none" and self.kind != "resnet":
            _fail(o, "downsample", self.downsample, "none with model.kind = mlp (the stem is convolutions)")
        _nonneg_int(o, "chance_outcomes", self.chance_outcomes)
        if self.chance_outcomes == 1:
            _fail(o, "chance_outcomes", 1, "0 (deterministic MuZero) or an integer >= 2 (Stochastic MuZero)")
        _nonneg_int(o, "chance_blocks", self.chance_blocks)
        if self.chance_outcomes and self.dynamics == "simulator":
            _fail(o, "chance_outcomes", self.chance_outcomes, "0 with model.dynamics = simulator (the game's own "
                  "simulator draws its chance)")
        _choice(o, "kind", self.kind, ("resnet", "mlp"))
        _choice(o, "dynamics", self.dynamics, ("learned", "simulator"))
        _choice(o, "value_transform", self.value_transform, ("phi", "identity"))
        _choice(o, "dynamics_action", self.dynamics_action, ("planes", "kernels"))
        if self.dynamics_action == "kernels" and self.kind != "resnet":
            _fail(o, "dynamics_action", self.dynamics_action, "planes with model.kind = mlp (kernels are convolutions)")
        for name in ("channels", "head_hidden", "mlp_embedding", "support_size"):
            _positive_int(o, name, getattr(self, name))
        for name in ("repr_blocks", "dyn_blocks", "pred_blocks", "proj_blocks"):
            _nonneg_int(o, name, getattr(self, name))
        if not isinstance(self.mlp_hidden, tuple) or not all(
            isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in self.mlp_hidden
        ):
            _fail(o, "mlp_hidden", self.mlp_hidden, "a tuple of integers >= 1")
        for name in ("normalize_hidden", "mover_relative"):
            if not isinstance(getattr(self, name), bool):
                _fail(o, name, getattr(self, name), "true or false")

    @property
    def num_bins(self) -> int:
        return 2 * self.support_size + 1


@dataclass(frozen=True)
class PlannerConfig:
    """Search settings (mctx).

    kind: ``"puct"`` (``mctx.muzero_policy``) or ``"gumbel"`` (``mctx.gumbel_muzero_policy``).
    num_simulations: simulations per search.
    pb_c_init / pb_c_base: PUCT constants c1, c2.
    dirichlet_alpha / dirichlet_fraction: root noise (PUCT only; fraction 0 disables).
    max_num_considered_actions / gumbel_scale: Gumbel root settings
      (gumbel_scale 0 makes the search deterministic, for evaluation).
    max_depth: optional cap on search depth (None: num_simulations).
    value_scale / maxvisit_init / rescale_values: Gumbel: how completed Q-values
      enter the improved policy, ``(maxvisit_init + max visits) * value_scale *
      q`` with ``q`` min-max scaled per node when ``rescale_values``
      (``mctx.qtransform_completed_by_mix_value``; its defaults).
    min_value_range: Gumbel, with ``rescale_values``: the smallest range the
      min-max scaling divides by (mctx's ``epsilon``), so Q-values closer than
      this are not stretched to the full [0, 1] (in the game's return units).
    """

    kind: Literal["puct", "gumbel"] = "puct"
    num_simulations: int = 25
    pb_c_init: float = 1.25
    pb_c_base: float = 19652.0
    dirichlet_alpha: float = 0.3
    dirichlet_fraction: float = 0.25
    max_num_considered_actions: int = 16
    gumbel_scale: float = 1.0
    max_depth: int | None = None
    value_scale: float = 0.1
    maxvisit_init: float = 50.0
    rescale_values: bool = True
    min_value_range: float = 1e-8

    def __post_init__(self):
        o = "planner"
        _number_in(o, "min_value_range", self.min_value_range, 0.0, float("inf"), lo_open=True)
        _number_in(o, "value_scale", self.value_scale, 0.0, float("inf"), lo_open=True)
        _number_in(o, "maxvisit_init", self.maxvisit_init, 0.0, float("inf"))
        _boolean(o, "rescale_values", self.rescale_values)
        _choice(o, "kind", self.kind, ("puct", "gumbel"))
        _positive_int(o, "num_simulations", self.num_simulations)
        _number_in(o, "pb_c_init", self.pb_c_init, 0.0, float("inf"), lo_open=True)
        _number_in(o, "pb_c_base", self.pb_c_base, 0.0, float("inf"), lo_open=True)
        _number_in(o, "dirichlet_alpha", self.dirichlet_alpha, 0.0, float("inf"), lo_open=True)
        _number_in(o, "dirichlet_fraction", self.dirichlet_fraction, 0.0, 1.0)
        _positive_int(o, "max_num_considered_actions", self.max_num_considered_actions)
        _number_in(o, "gumbel_scale", self.gumbel_scale, 0.0, float("inf"))
        if self.max_depth is not None:
            _positive_int(o, "max_depth", self.max_depth)


@dataclass(frozen=True)
class TargetConfig:
    """How training targets are built (docs/architecture.md §4).

    history_length: L frames and actions stacked into one observation (thesis 4).
    unroll_steps: K dynamics steps unrolled in training (thesis 5); 0 only in
      AlphaZero mode (``model.dynamics = simulator``), which sets it to 0.
    td_steps: N, the n-step return horizon (thesis 10).
    discount: gamma (thesis 0.997).
    """

    history_length: int = 4
    unroll_steps: int = 5
    td_steps: int = 10
    discount: float = 0.997

    def __post_init__(self):
        o = "targets"
        _positive_int(o, "history_length", self.history_length)
        _nonneg_int(o, "unroll_steps", self.unroll_steps)
        _positive_int(o, "td_steps", self.td_steps)
        _number_in(o, "discount", self.discount, 0.0, 1.0)


@dataclass(frozen=True)
class LearnerConfig:
    """Loss coefficients and optimiser (docs/architecture.md §6).

    value_coef: c^v; consistency_coef: c^s; l2_coef: c^{L2}.
    reward_coef: c^r, the weight of the reward term, summed over the K
      unrolled steps (1: the thesis's loss; 1/K weighs each step's reward as
      the policy and value terms weigh theirs, as MuZero's gradient scale
      does). Not the thesis's knob.
    learning_rate: Adam step size (peak, if a schedule is used).
    lr_schedule: ``"constant"``, ``"cosine"`` (warmup then cosine decay to 0 at
      ``decay_steps``) or ``"linear"`` (warmup then linear decay to 0).
    warmup_steps / decay_steps: schedule lengths in updates.
    lr_decay_over: what the decay runs over: ``"updates"`` (``decay_steps``)
      or ``"budget"``: the share of the run's budget used: env steps /
      ``schedule.max_env_steps`` when that is set (so the sittings of a long
      run do not each restart the decay), else elapsed / ``--minutes`` (the
      learning rate reaches its floor when the budget ends, whatever the
      machine's speed; a resume with more ``--minutes`` extends the budget).
    lr_final_fraction: the floor the decay ends at, as a fraction of
      ``learning_rate`` (0: decay to 0).
    lr_decay_start: the share of the decay's span (the budget, or
      ``decay_steps``) held at the peak before the decay begins (0: decay from
      the start; 0.5: constant for the first half, then the whole decay in
      the second).
    max_grad_norm: global-norm clipping threshold.
    target_update_period: updates between target-network refreshes.
    chance_coef / commitment_coef: Stochastic MuZero only
      (``model.chance_outcomes``): the weight of the chance prior's
      cross-entropy toward the encoder's code, summed over the K steps, and
      the VQ-VAE commitment weight beta of ``||c - softmax(e)||^2`` that pulls
      the encoder's soft output toward its one-hot code. The afterstate
      value Q is trained toward the same n-step return as the value, with
      ``value_coef``.
    chance_diversity_coef: Stochastic MuZero only: the weight of ``log M -
      H(u) + mean H(p)`` (``p`` one transition's encoder softmax, ``u`` the
      batch's mean; log M less the codes' information about the transitions):
      pushes the encoder to use its codes evenly and to name each transition
      with certainty (0: off; an encoder that names every transition alike
      makes the model deterministic again).
    chance_codes: Stochastic MuZero only: where the chance prior's and the
      chance dynamics' codes come from: ``"encoder"`` (learned from the
      observations) or ``"game"``: the true outcome, named from the stored
      frames by the game's code function (``EnvSpec.chance_code``, e.g.
      pgx 2048's new tile; :mod:`moozi.envs.chance`); the encoder is then
      not trained and ``commitment_coef`` / ``chance_diversity_coef`` weigh 0.
    augment_symmetries: show every sampled window to the learner through a
      random one of the game's board symmetries (AlphaZero's augmentation;
      the game must declare some: ``EnvSpec.symmetries``).
    devices: the learner's update runs data parallel over this many of its
      process's local devices (each holds the params and 1/D of the batch; XLA
      averages the gradients with an all-reduce), with the same result as one
      device at the same global batch up to float rounding. ``schedule.batch_size``
      must divide by it. 1 (default): one device.
    """

    value_coef: float = 0.25
    reward_coef: float = 1.0
    consistency_coef: float = 2.0
    l2_coef: float = 1e-4
    learning_rate: float = 1e-2
    lr_schedule: Literal["constant", "cosine", "linear"] = "constant"
    warmup_steps: int = 0
    decay_steps: int = 100_000
    lr_decay_over: Literal["updates", "budget"] = "updates"
    lr_final_fraction: float = 0.0
    lr_decay_start: float = 0.0
    max_grad_norm: float = 5.0
    target_update_period: int = 500
    augment_symmetries: bool = False
    devices: int = 1
    chance_coef: float = 1.0
    commitment_coef: float = 0.25
    chance_diversity_coef: float = 0.0
    chance_codes: Literal["encoder", "game"] = "encoder"

    def __post_init__(self):
        o = "learner"
        _positive_int(o, "devices", self.devices)
        for name in ("value_coef", "reward_coef", "consistency_coef", "l2_coef", "chance_coef", "commitment_coef",
                     "chance_diversity_coef"):
            _number_in(o, name, getattr(self, name), 0.0, float("inf"))
        _number_in(o, "learning_rate", self.learning_rate, 0.0, float("inf"), lo_open=True)
        _choice(o, "lr_schedule", self.lr_schedule, ("constant", "cosine", "linear"))
        _nonneg_int(o, "warmup_steps", self.warmup_steps)
        _positive_int(o, "decay_steps", self.decay_steps)
        _choice(o, "lr_decay_over", self.lr_decay_over, ("updates", "budget"))
        _number_in(o, "lr_final_fraction", self.lr_final_fraction, 0.0, 1.0)
        _number_in(o, "lr_decay_start", self.lr_decay_start, 0.0, 1.0, hi_open=True)
        _number_in(o, "max_grad_norm", self.max_grad_norm, 0.0, float("inf"), lo_open=True)
        _positive_int(o, "target_update_period", self.target_update_period)
        _boolean(o, "augment_symmetries", self.augment_symmetries)
        _choice(o, "chance_codes", self.chance_codes, ("encoder", "game"))
