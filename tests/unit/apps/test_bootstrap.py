"""Settings come from the environment, each with a default a user can predict."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeau.apps.cli.bootstrap import DEFAULT_PUBLISHER, DEFAULT_RESERVE, data_home, settings_from


@pytest.mark.parametrize(
    ("environ", "platform", "expected"),
    [
        ({"HOME": "/home/u"}, "linux", "/home/u/.local/share/nodeau"),
        ({"HOME": "/home/u", "XDG_DATA_HOME": "/data"}, "linux", "/data/nodeau"),
        ({"HOME": "/home/u", "XDG_DATA_HOME": "rel"}, "linux", "/home/u/.local/share/nodeau"),
        ({"HOME": "/Users/u"}, "darwin", "/Users/u/Library/Application Support/nodeau"),
        ({"HOME": "/home/u", "NODEAU_HOME": "/srv/nodeau"}, "linux", "/srv/nodeau"),
    ],
)
def test_the_data_folder(environ: dict[str, str], platform: str, expected: str) -> None:
    assert data_home(environ, platform) == Path(expected)


def test_settings_defaults_and_overrides() -> None:
    plain = settings_from({"HOME": "/home/u", "NODEAU_MACHINE": "garage"})
    assert (plain.machine, plain.publisher_url, plain.reserve_bytes) == (
        "garage",
        DEFAULT_PUBLISHER,
        DEFAULT_RESERVE,
    )
    assert plain.models_root == Path("/home/u/.local/share/nodeau/models")
    assert plain.registry_path == Path("/home/u/.local/share/nodeau/registry.sqlite3")
    assert plain.catalog.name == "catalog.json" and plain.catalog.exists()
    custom = settings_from(
        {
            "HOME": "/home/u",
            "NODEAU_CATALOG": "/tmp/c.json",
            "NODEAU_PUBLISHER_URL": "http://127.0.0.1:9",
            "NODEAU_DISK_RESERVE_BYTES": "123",
        }
    )
    assert (custom.catalog, custom.publisher_url, custom.reserve_bytes) == (
        Path("/tmp/c.json"),
        "http://127.0.0.1:9",
        123,
    )
