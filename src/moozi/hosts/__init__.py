"""The components a backend hosts, each built from plain data (a config dict and integers).

* :class:`~moozi.hosts.learner.LearnerHost`: the learner / parameter server. Owns the train state, target
  network and replay, and the run's checkpoints through :class:`~moozi.checkpoint.policy.RunCheckpoints`;
  batches and priorities never leave it. Parameters leave as one ``{"version", "params"}`` object per version.
* :class:`~moozi.hosts.acting.ActingHost`: a training worker (W of them) or the testing worker: one
  :class:`~moozi.workers.Actor` with its own episode assembly.
* :class:`~moozi.hosts.reanalyze.ReanalyzeHost`: a reanalyze worker: a forced-action pool actor over a
  :class:`~moozi.envs.replay_env.ReplayEnvPool`, searching stored positions with the target parameters and no
  noise.
* :mod:`~moozi.hosts.common`: what they share (seeds, the cluster's versions, published params).

This floor imports nothing from :mod:`moozi.driver` (a test holds it), so a worker process that hosts one loads
the component and what it needs, never the driver. They import no Ray: :mod:`moozi.driver.distributed` wraps
them as Ray actors and :class:`~moozi.driver.backend.LocalBackend` calls them in-process. Each owns its
randomness, derived from the run seed, its worker id and its incarnation (a restarted worker plays new games).
Import the classes from their modules (``from moozi.hosts.learner import LearnerHost``): this package's
``__init__`` loads nothing.
"""
