"""The collection hook is light and inert by default."""

from __future__ import annotations

import sys

from autotest.consistency import hook
from tests import waits


def test_importing_the_hook_loads_no_heavy_dependency():
    code = ("import sys, autotest.consistency.hook as h; "
            "print(sorted(m for m in ('torch', 'msprobe', 'transformers', 'pandas', 'yaml') if m in sys.modules))")
    result = waits.run([sys.executable, "-c", code], capture_output=True, text=True, limit_s=60, check=True)
    assert result.stdout.strip() == "[]"


def test_unset_variable_gives_the_shared_no_op(monkeypatch):
    monkeypatch.delenv(hook.ENV, raising=False)
    ctx = hook.consistency_forward(object(), side="rollout", step=3, requests=[("r0", [1, 2])])
    assert ctx is hook._NULL
    assert hook.install_from_env() is False
