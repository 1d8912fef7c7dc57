from __future__ import annotations

from autotest.calibration import init, init_cli
from autotest.readers.registry import BUILTIN


def test_the_parser_names_the_readers_formats_and_init_default_without_importing_them():
    # the registry's records import no reader, so building the parser (every command, --help too) loads none
    assert init_cli.LOG_FORMATS == tuple(f.name for f in BUILTIN)
    assert init_cli.DEFAULT_TIMEOUT_S == init.DEFAULT_TIMEOUT_S
