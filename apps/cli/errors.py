"""Which failures a person gets as one line (expected ones) rather than a traceback (bugs)."""

from __future__ import annotations

from nodeau.ports.errors import SettingsError
from nodeau.ports.hardware import HardwareError
from nodeau.ports.models import ModelError
from nodeau.ports.runtime import RuntimeFailure
from nodeau.ports.state import StateError

__all__ = ["SettingsError", "one_line"]


def one_line(exc: BaseException) -> str | None:
    """The message for an expected failure, or None for a bug that deserves its traceback."""
    if isinstance(exc, ModelError | SettingsError | StateError | RuntimeFailure | HardwareError):
        return " ".join(str(exc).split())
    return None
