"""Metric-log readers: one module per format, each turning a framework's log into a :class:`~autotest.judge.trace.Trace`.

:mod:`autotest.readers.registry` holds one record per format (how it is recognised, found, copied and read);
:func:`autotest.readers.reading.read_trace` reads any of them. Nothing is imported here, so that the inputs
and the launcher can read the registry without loading a reader.
"""
