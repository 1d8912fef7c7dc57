"""Noise-aware bisect: from a failed verdict to the framework commit that caused it (``rl-autotest bisect``).

- ``commits``: the first-parent commits between a good and a bad ref of the framework repository;
- ``search``: multisection over them (P probes a round), pure;
- ``probe``: one commit judged by the case's gates, with more replicates when its statistics sit near a threshold;
- ``session``: the whole bisect (re-check good and bad today, rounds, skips) and its bisect.json / bisect.md.
"""
