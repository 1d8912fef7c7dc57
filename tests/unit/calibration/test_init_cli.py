from __future__ import annotations

from autotest.calibration import init, init_cli
from autotest.judge.readers import READERS


def test_the_parser_names_the_readers_formats_and_init_default_without_importing_them():
    # init_cli spells them out so that building the parser (every command, --help too) loads no reader
    assert init_cli.LOG_FORMATS == tuple(READERS)
    assert init_cli.DEFAULT_TIMEOUT_S == init.DEFAULT_TIMEOUT_S
