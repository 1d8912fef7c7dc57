"""Run history: the verdict store (SQLite | PostgreSQL), drift detection, the dashboard and its command."""

#: the run history's URL when no --history is given; here, not in ``database``, so that a command's help text
#: names it without loading the store's module
HISTORY_ENV = "RL_AUTOTEST_HISTORY"
