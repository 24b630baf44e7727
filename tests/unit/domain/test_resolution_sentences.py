"""A name that is ambiguous, said whole (domain/resolution.py): each artifact it names, by
its short id, with the machines that hold it, and none when it is held here."""

from __future__ import annotations

from nodeau.domain.resolution import Known, Miss, Unresolved, resolve_name

A, B = "a1" * 32, "b2" * 32


def test_an_ambiguous_name_lists_each_artifact_with_where_it_is_held() -> None:
    known = [
        Known(artifact_id=A, names=("qwen",), where="m2"),
        Known(artifact_id=A, names=("qwen",), where="m1"),
        Known(artifact_id=B, names=("qwen",)),
    ]
    assert resolve_name("qwen", known) == Unresolved(
        miss=Miss.AMBIGUOUS,
        sentence="qwen names 2 different artifacts (a1a1a1a1a1a1 on m1, m2; b2b2b2b2b2b2); "
        "ask for one by its SHA-256 prefix",
    )
