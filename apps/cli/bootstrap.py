"""The CLI's settings: the one frozen ``Settings`` of ``nodeau.apps.settings``, read once.

Kept as the CLI's import point while its commands move to one composition root.
"""

from __future__ import annotations

from nodeau.apps.settings import (
    DEFAULT_PUBLISHER,
    DEFAULT_RESERVE,
    Settings,
    data_home,
    settings,
    settings_from,
    shipped_catalog,
    utc_now,
)

__all__ = [
    "DEFAULT_PUBLISHER",
    "DEFAULT_RESERVE",
    "Settings",
    "data_home",
    "settings",
    "settings_from",
    "shipped_catalog",
    "utc_now",
]
