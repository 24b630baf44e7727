"""The one root of every expected failure: what a person gets as one line, never a traceback.

Each port names its own subclass (``StateError``, ``ModelError``, ``RuntimeFailure``,
``HardwareError``, ``ClusterError``...); adapters raise those ``from`` their
library's errors, and the apps catch ``NodeauError`` alone. Anything else that
escapes (``ValueError`` from a broken invariant, a bug) is not an expected
failure and is never swallowed.
"""

from __future__ import annotations


class NodeauError(Exception):
    """An expected failure whose text is one line for a person."""

    def one_line(self) -> str:
        """The message folded onto one line."""
        return " ".join(str(self).split()) or type(self).__name__


class SettingsError(NodeauError):
    """A setting (environment variable, option, file) Nodeau cannot use."""
