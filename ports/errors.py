"""The one root of every expected failure: what a person gets as one line, never a traceback.

Why it is so: docs/adr/decisions/ports.md (errors.py).
"""

from __future__ import annotations


class NodeauError(Exception):
    """An expected failure whose text is one line for a person."""

    def one_line(self) -> str:
        """The message folded onto one line."""
        return " ".join(str(self).split()) or type(self).__name__


class SettingsError(NodeauError):
    """A setting (environment variable, option, file) Nodeau cannot use."""
