"""The collection hook is light and inert by default."""

from __future__ import annotations

import subprocess
import sys

from autotest.consistency import hook


def test_importing_the_hook_loads_no_heavy_dependency():
    code = ("import sys, autotest.consistency.hook as h; "
            "print(sorted(m for m in ('torch', 'msprobe', 'transformers', 'pandas', 'yaml') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"


def test_unset_variable_gives_the_shared_no_op(monkeypatch):
    monkeypatch.delenv(hook.ENV, raising=False)
    ctx = hook.consistency_forward(object(), side="rollout", step=3, requests=[("r0", [1, 2])])
    assert ctx is hook._NULL
    assert hook.install_from_env() is False
