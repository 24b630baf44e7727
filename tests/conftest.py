"""Settings every test shares: Hypothesis judges what a property does, never how long it takes.

Hypothesis's default deadline (200 ms an example) fails a property on a loaded machine; a
timing is a benchmark's business (bench/), so no test has one.
"""

from __future__ import annotations

import signal

import pytest
from hypothesis import settings

settings.register_profile("nodeau", deadline=None)
settings.load_profile("nodeau")

# the helpers in tests/support (builders, fakes, the contract suites two folders run) assert
# as the tests do: pytest rewrites their asserts too, so a failure says what it compared
pytest.register_assert_rewrite("tests.support")

# A run started in the background by a shell without job control inherits SIGINT ignored,
# and so would every command a test starts (Python keeps an ignored SIGINT). A person's
# Ctrl-C reaches a command whose SIGINT is at its default: the tests' commands start so.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
