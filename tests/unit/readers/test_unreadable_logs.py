"""Metric-log messages the fuzz suite (tests/fuzz) found broken over lines: a tag is shown escaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError


def test_a_tensorboard_tag_with_a_control_character_stays_on_one_line(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from autotest.readers.tensorboard import read_tensorboard

    writer = EventFileWriter(str(tmp_path))
    writer.add_event(Event(wall_time=1.0, step=-3, summary=Summary(value=[Summary.Value(tag="a\rb", simple_value=1.0)])))
    writer.close()
    with pytest.raises(UsageError, match=r"tfevents.*: tag a\\rb has step -3, a negative step") as err:
        read_tensorboard(tmp_path)
    assert "\r" not in str(err.value)
