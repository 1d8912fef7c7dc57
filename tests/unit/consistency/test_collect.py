"""The observer refuses protocol misuse (no MSProbe dump is made)."""

from __future__ import annotations

import pytest

from autotest.consistency.collect import make_observer


def test_protocol_misuse_is_refused(tmp_path):
    observer = make_observer({"output_dir": str(tmp_path), "window_step": 0, "msprobe_log_level": "error"})
    with pytest.raises(ValueError, match="side must be one of"):
        with observer.forward("critic", 0, "x", [], [], 0, None):
            pass
    with pytest.raises(ValueError, match="1 request_ids but 2 token_ids"):
        with observer.forward("actor", 0, "x", ["a"], [[1], [2]], 0, None):
            pass
    observer.close()
    with pytest.raises(RuntimeError, match="closed"):
        with observer.forward("actor", 0, "x", [], [], 0, None):
            pass
