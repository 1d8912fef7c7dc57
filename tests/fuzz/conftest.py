"""Hypothesis profiles of the fuzz suite: ``ci`` (default, bounded: the suite stays under a minute on 2 cores)
and ``nightly`` (many more examples), chosen by ``HYPOTHESIS_PROFILE``."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
           "print_blob": True}
# ci: the same examples every run (a pull request is never red from an input drawn by chance; the examples
# change when the strategies do); nightly: fresh random inputs each night, many more of them.
settings.register_profile("ci", max_examples=50, derandomize=True, **_COMMON)
settings.register_profile("nightly", max_examples=1000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
