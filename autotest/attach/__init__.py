"""What a run loads without the harness: this folder goes first on the run's PYTHONPATH (:data:`ATTACH_DIR`).

Standalone, stdlib-only at import: ``rl_autotest_collect`` (the consistency job's collection and its attach-point
table, docs/consistency.md) and ``rl_autotest_nudge`` (an A/A pair's harness-made nudge, docs/ab.md).
``sitecustomize`` installs each when its variable is set.
"""

from pathlib import Path

ATTACH_DIR = Path(__file__).resolve().parent
