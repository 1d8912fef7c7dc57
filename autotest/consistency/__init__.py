"""The consistency dump job: collect paired rollout/actor MSProbe dumps, pair, analyse, report.

Flow (each step one module):

- ``screening``: step 0, a previous run's config and consistency metrics → the diagnostic window.
- ``config``: the diagnostic config dict (``--diagnostic-config``) as a typed object.
- ``msprobe_config``: writes one MSProbe ``config.json`` per side (statistics pass, tensor pass).
- ``collect``: ``make_observer(config)``, the default-off hook the workload calls around one
  forward per side; writes MSProbe dumps and the correlation logs (``correlation``).
- ``dumps`` → ``pairing`` → ``mapping`` → ``compare`` → ``classify`` → ``report`` → ``outputs``,
  orchestrated by ``analyze.analyze``.
- ``logprob_records`` → ``logprob_compare``: the per-token log-probs the rollout recorded while
  sampling, its own recompute and the trainer's, compared in pairs; ``verdict`` classifies the
  divergence (sampling path, module, aligned).

Nothing here imports torch or msprobe at module load; they are imported inside the functions
that need them (collection and tensor comparison).
"""

from __future__ import annotations
