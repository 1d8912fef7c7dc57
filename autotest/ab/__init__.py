"""Paired A/B gates: base and head of the framework on the same seeds and runner, judged on their differences.

:mod:`.sides` reads what ``--base`` and ``--head`` name; :mod:`.interleave` runs the pairs (each an ordinary run of
:func:`autotest.pipeline.run_case`) and judges them (:mod:`autotest.judge.paired`); :mod:`.aa` measures the
paired noise from A/A pairs for the baseline's ``paired:`` section; :mod:`.ab_report` writes ab.md and its plots.
docs/ab.md has the whole picture.
"""
