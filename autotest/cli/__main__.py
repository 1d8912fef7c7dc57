"""``python -m autotest.cli``: the ``rl-autotest`` command."""

import sys

from autotest.cli import main

sys.exit(main())
