"""The teacher server's weights switch without a server: ``--missing-keys PREFIX`` (the ``teacher-keys-renamed``
regression) initialises exactly the parameters under PREFIX afresh, and a PREFIX that names none is one error line.
The served endpoints, for real, are in tests/integration/workloads/test_teacher_server.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from autotest.workloads.teacher_server import Teacher  # noqa: E402
from autotest.workloads.teachers import COMMITTED_DIR  # noqa: E402

CHECKPOINT = COMMITTED_DIR / "digit_sum_teacher"
PREFIX = "model.layers.1.self_attn."


def test_missing_keys_initialises_afresh_only_the_parameters_under_the_prefix() -> None:
    loaded = dict(Teacher(CHECKPOINT, "t").model.named_parameters())
    renamed = dict(Teacher(CHECKPOINT, "t", missing_keys=PREFIX).model.named_parameters())
    under = [n for n in loaded if n.startswith(PREFIX)]
    assert under and all(not torch.equal(loaded[n], renamed[n]) or loaded[n].dim() == 1 for n in under)
    assert any(loaded[n].dim() > 1 for n in under)
    assert all(torch.equal(loaded[n], renamed[n]) for n in loaded if not n.startswith(PREFIX))
    norms = [n for n in under if renamed[n].dim() == 1]
    assert all(torch.equal(renamed[n], torch.ones_like(renamed[n])) for n in norms)


def test_a_prefix_that_names_no_parameter_is_one_error_line() -> None:
    with pytest.raises(SystemExit, match=r"^error: --missing-keys model\.nothing\.: names no parameter"):
        Teacher(CHECKPOINT, "t", missing_keys="model.nothing.")
