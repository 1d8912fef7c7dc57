"""Put first on an A/A pair's nudged run's PYTHONPATH: the harness-made nudge (:mod:`rl_autotest_nudge`)."""
