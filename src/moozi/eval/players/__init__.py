"""Players for two-player games, one batched interface (what the arena, ``moozi match`` and ratings use).

A player plays ``B`` games in lock-step (the arena's pool) and sees every step
of every game, whoever moved::

    player.reset(ts)                 # ts: [B] first steps (numpy TimeStep)
    actions = player.act(ts, movers) # [B] environment actions; only rows where movers [B] is True are read
    player.observe(ts_next, actions) # after the pool stepped with the actions of both sides

so players that keep state (the learned model's history stack, OpenSpiel
states) keep it for every game, and ``act`` is only asked for the games where
the player is to move. Each player owns its random stream (seeded by the
arena from the match seed and its side).

Every player has a :class:`PlayerSpec`: a kind, the settings that change how
it plays, and an ``id`` (what ratings and game records name it by), so a
result is never published without both players' settings.

Player strings (``moozi match A B``)::

    random                     uniformly random legal moves
    perfect                    tic-tac-toe minimax (uniform among optimal moves)
    solver                     connect four solved (BitBully, the optional extra moozi[solver]): a move of the
                               best score (fastest win, slowest loss), random among ties; ,result=1: random
                               among the moves that keep the solved result
    os-mcts-N                  OpenSpiel's C++ MCTSBot: N simulations, random rollouts (uct_c 2, solver on)
    ab / ab-D                  OpenSpiel's alpha-beta: to the end of the game (small games), or D plies deep
                               with the horizon scored 0 (wins and losses within D plies); random among best
    human                      a person at the terminal (the board drawn, moves typed; --pairs 1)
    mcts-N                     batched rollout MCTS in JAX on the real simulator (JAX-native games):
                               PUCT without noise, N simulations, random playouts as values, uniform prior
    az:RUN[@CKPT]              AlphaZero mode: the run's network (prior and value) searching the real simulator
    gtp:COMMAND                an external engine speaking GTP (one process per game of the batch;
                               no commas in COMMAND), e.g. gtp:moozi gtp runs/c4; an engine that crashes,
                               hangs (,timeout=S per command, default 60), refuses a move or answers an
                               illegal one or garbage forfeits that game and is started again for the next
    RUN[@CKPT]                 a trained run: the learned-model search of its test planner
                               (CKPT: latest (default), best or an update count); a run trained in
                               AlphaZero mode (model.dynamics = simulator) is az:RUN
    prior:RUN[@CKPT]           the same network's prior only (no search)

    options after a comma, for any player: ,eps=0.05 (a uniformly random legal move
    with this probability); for runs: ,sims=N (simulations) or ,ms=T (a time budget per move: the
    most simulations of a ladder 4, 8, ..., 1024 that fit, measured), ,temp=T (sample the
    search policy, or the prior, sharpened by 1/T; 0 = greedy); for az: ,sims=N; for runs and az,
    the play-time search options (:mod:`.options`): ,sym=P (search through a random board symmetry
    with probability P), ,ptemp=T (prior temperature), ,pick=policy|visits|value|lcb and ,lcb=C; for
    os-mcts and mcts: ,rollouts=K; for os-mcts: ,uct=C, ,solve=0|1; for gtp: ,timeout=S.

Batched players stay batched: the learned-model player gathers the games to
move into one padded batch (sizes rounded up to powers of two, so a handful of
compiled shapes) and searches them in one jitted call.

Modules: :mod:`.base` (spec, interface, clock), :mod:`.simple`, :mod:`.openspiel`, :mod:`.learned`,
:mod:`.external` (with :mod:`.gtp_engine`), :mod:`.options` (play-time search options) and :mod:`.registry`
(player strings); everything is re-exported here.
"""

from moozi.eval.players.base import MoveClock, Player, PlayerSpec
from moozi.eval.players.external import GTPPlayer, HumanPlayer
from moozi.eval.players.learned import RunPlayer, TrueModelPlayer
from moozi.eval.players.openspiel import AlphaBetaPlayer, OpenSpielMCTSPlayer
from moozi.eval.players.registry import BUILTIN, make_player, parse_player
from moozi.eval.players.simple import EpsilonPlayer, PerfectPlayer, RandomPlayer

__all__ = ["AlphaBetaPlayer", "BUILTIN", "EpsilonPlayer", "GTPPlayer", "HumanPlayer", "MoveClock",
           "OpenSpielMCTSPlayer", "PerfectPlayer", "Player", "PlayerSpec", "RandomPlayer", "RunPlayer",
           "TrueModelPlayer", "make_player", "parse_player"]
