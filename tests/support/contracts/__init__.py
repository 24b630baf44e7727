"""The shared contract suites: each runs against every implementation of its port.

A test module runs a suite by ``globals().update(suite_of(suite, "store"))`` beside its own
fixture of that name."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType


def suite_of(suite: ModuleType, fixture: str) -> dict[str, Callable[..., None]]:
    """The suite's tests that take ``fixture``, by name."""
    return {
        name: test
        for name, test in vars(suite).items()
        if name.startswith("test_")
        and callable(test)
        and fixture in inspect.signature(test).parameters
    }
