"""The cap on a server's connections against the descriptors it is allowed: the most that
fit, never more, whatever the limit and the connections it opens itself."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nodeau.apps.endpoint.limits import connections_that_fit, descriptors_needed


@given(
    descriptors=st.integers(min_value=300, max_value=100_000),
    in_flight=st.integers(min_value=0, max_value=2048),
    idle=st.integers(min_value=0, max_value=128),
)
def test_the_connections_that_fit_are_the_most_that_fit(
    descriptors: int, in_flight: int, idle: int
) -> None:
    fits = connections_that_fit(descriptors, in_flight, idle)
    if descriptors_needed(1, in_flight, idle) > descriptors:
        assert fits == 1  # nothing fits: one connection still, or nothing would answer
        return
    assert descriptors_needed(fits, in_flight, idle) <= descriptors
    assert descriptors_needed(fits + 1, in_flight, idle) > descriptors


def test_an_endpoint_allowed_512_files_holds_159_connections() -> None:
    assert connections_that_fit(512, 512, 64) == 159
    assert descriptors_needed(1024, 512, 64) == 1729  # the endpoint's default cap
