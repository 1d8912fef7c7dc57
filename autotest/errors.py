"""The one user-facing error type: a mistake in input, reported as a single line."""

from __future__ import annotations


class UsageError(ValueError):
    """A user mistake (bad file, key, value or path). The CLI prints it as one line and exits 2."""
