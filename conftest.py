"""Root conftest: every Ray the tests (and the runs they launch) start stays local and quiet."""

import os

# Ray 2.60 enables token auth and usage reporting by default; tests only ever use local clusters.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
