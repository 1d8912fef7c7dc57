"""The collection a run loads without the harness: this folder goes first on the run's PYTHONPATH.

``rl_autotest_collect`` (standalone, stdlib-only at import) holds the attach-point table; ``sitecustomize``
installs it when ``RL_AUTOTEST_COLLECT`` is set. See docs/consistency.md.
"""
