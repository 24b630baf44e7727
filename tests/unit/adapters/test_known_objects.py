"""The controller's cache of its objects (adapters/kube/informer_cache.py): what it answers after
lists, reads, writes and watch events arriving in any order. The real adapters that keep it
are proved against a real API server (tests/kube, the controller's tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeau.adapters.kube.informer_cache import UNKNOWN, KnownObjects, version_of

PODS = "pods"


def body(name: str, version: int, **more: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)}, **more}


def test_nothing_is_known_before_a_list_or_a_read() -> None:
    assert KnownObjects().lookup(PODS, "a") is UNKNOWN


def test_a_listed_kind_is_complete_and_a_name_it_lacks_is_absent() -> None:
    known = KnownObjects()
    known.listed(PODS, [body("a", 5)], version=9)
    assert known.lookup(PODS, "a") == body("a", 5)
    assert known.lookup(PODS, "b") is None
    assert known.lookup("gpuservices", "a") is UNKNOWN  # another kind was never listed


def test_an_older_version_never_replaces_a_newer_one() -> None:
    known = KnownObjects()
    known.seen(PODS, body("a", 7, phase="Running"))
    known.seen(PODS, body("a", 6, phase="Pending"))  # a late watch event
    assert known.lookup(PODS, "a") == body("a", 7, phase="Running")
    known.seen(PODS, body("a", 8, phase="Failed"))
    assert known.lookup(PODS, "a") == body("a", 8, phase="Failed")


def test_a_deleted_object_is_not_brought_back_by_a_late_event_but_a_new_one_is_kept() -> None:
    known = KnownObjects()
    known.listed(PODS, [], version=1)
    known.seen(PODS, body("a", 5))
    known.gone(PODS, "a", version=6)
    known.seen(PODS, body("a", 5))  # the event of its creation, arriving late
    assert known.lookup(PODS, "a") is None
    known.seen(PODS, body("a", 9))  # a new object of the same name
    assert known.lookup(PODS, "a") == body("a", 9)


def test_a_deletion_older_than_what_is_known_leaves_it() -> None:
    known = KnownObjects()
    known.seen(PODS, body("a", 9))
    known.gone(PODS, "a", version=6)  # the deletion of an earlier object of that name
    assert known.lookup(PODS, "a") == body("a", 9)


def test_a_forgotten_name_is_asked_for_even_in_a_complete_kind_until_it_is_seen() -> None:
    known = KnownObjects()
    known.listed(PODS, [body("a", 5)], version=9)
    known.forget(PODS, "a")
    assert known.lookup(PODS, "a") is UNKNOWN
    assert known.lookup(PODS, "b") is None  # the rest stays known
    known.seen(PODS, body("a", 11))
    assert known.lookup(PODS, "a") == body("a", 11)
    known.forget(PODS, "b")
    known.gone(PODS, "b")  # a read answered 404
    assert known.lookup(PODS, "b") is None


def test_a_list_keeps_what_was_seen_after_it_was_made_and_drops_what_it_lacks() -> None:
    known = KnownObjects()
    known.seen(PODS, body("old", 3))
    known.seen(PODS, body("made-since", 12))  # written while the list was on its way
    known.seen(PODS, body("changed", 14))
    known.listed(PODS, [body("changed", 8), body("listed", 4)], version=10)
    assert known.lookup(PODS, "old") is None  # deleted before the list was made
    assert known.lookup(PODS, "made-since") == body("made-since", 12)
    assert known.lookup(PODS, "changed") == body("changed", 14)
    assert [b["metadata"]["name"] for b in known.bodies(PODS)] == [
        "changed",
        "listed",
        "made-since",
    ]


def test_a_list_clears_tombstones_it_is_newer_than() -> None:
    known = KnownObjects()
    known.gone(PODS, "a", version=5)
    known.listed(PODS, [], version=10)
    known.seen(PODS, body("a", 4))  # older than the list, yet not a deleted one's event now
    assert known.lookup(PODS, "a") == body("a", 4)


def test_a_version_that_does_not_read_counts_as_the_oldest() -> None:
    assert version_of({"metadata": {"name": "a", "resourceVersion": "x"}}) == 0
    assert version_of({"metadata": {"name": "a"}}) == 0
    assert version_of(body("a", 42)) == 42


EVENTS = st.lists(
    st.tuples(st.sampled_from(["seen", "gone"]), st.integers(min_value=1, max_value=30)),
    max_size=12,
)


@given(EVENTS)
def test_whatever_the_order_of_events_the_newest_version_decides(
    events: list[tuple[str, int]],
) -> None:
    known = KnownObjects()
    known.listed(PODS, [], version=0)
    for what, version in events:
        if what == "seen":
            known.seen(PODS, body("a", version))
        else:
            known.gone(PODS, "a", version)
    # the oracle: the event with the highest version wins; at a tie a deletion wins
    # (a deletion's version is the object's last one)
    newest = max(events, key=lambda e: (e[1], e[0] == "gone"), default=None)
    found = known.lookup(PODS, "a")
    if newest is None or newest[0] == "gone":
        assert found is None
    else:
        assert found == body("a", newest[1])
