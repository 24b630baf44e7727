"""One machine's entitlement store: the id made once, the document replaced whole, the
anchor only forward, and files that do not read named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nodeau.adapters.entitlement_file import (
    ANCHOR_FILE,
    DOCUMENT_FILE,
    ID_FILE,
    FileEntitlementStore,
)
from nodeau.ports.entitlements import EntitlementStoreError, StoredEntitlement

T0 = datetime(2025, 6, 1, tzinfo=UTC)


def test_a_new_home_has_an_id_and_nothing_else(tmp_path: Path) -> None:
    store = FileEntitlementStore(tmp_path / "home")
    kept = store.read()
    assert kept == StoredEntitlement(
        installation_id=kept.installation_id,
        document=None,
        anchor=None,
        where=str(tmp_path / "home" / DOCUMENT_FILE),
    )
    assert len(kept.installation_id) == 32 and int(kept.installation_id, 16) >= 0
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == [ID_FILE]


def test_the_id_is_made_once_and_kept(tmp_path: Path) -> None:
    first = FileEntitlementStore(tmp_path).read().installation_id
    assert FileEntitlementStore(tmp_path).read().installation_id == first
    other = FileEntitlementStore(tmp_path / "elsewhere").read().installation_id
    assert other != first


def test_install_replaces_the_document_whole_and_remove_takes_it(tmp_path: Path) -> None:
    store = FileEntitlementStore(tmp_path)
    store.install(b"first", T0)
    store.install(b"second", T0)
    assert store.read().document == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == [ANCHOR_FILE, DOCUMENT_FILE, ID_FILE]
    assert store.remove(T0) is True
    assert store.remove(T0) is False
    assert store.read().document is None


def test_the_anchor_only_moves_forward(tmp_path: Path) -> None:
    store = FileEntitlementStore(tmp_path)
    store.advance_anchor(T0)
    store.advance_anchor(T0 - timedelta(days=3))
    assert store.read().anchor == T0
    store.remove(T0 + timedelta(hours=1))
    assert store.read().anchor == T0 + timedelta(hours=1)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (ANCHOR_FILE, "yesterday", "is not an ISO 8601 moment"),
        (ANCHOR_FILE, "2025-06-01T00:00:00", "has no UTC offset"),
        (ID_FILE, "   ", "is not printable text"),
        (ID_FILE, "x" * 200, "is longer than 128 characters"),
    ],
)
def test_a_kept_file_that_does_not_read_is_named(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(EntitlementStoreError, match=rf"^{tmp_path / name} {message}"):
        FileEntitlementStore(tmp_path).read()
