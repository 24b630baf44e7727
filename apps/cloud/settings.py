"""Nodeau Cloud's settings: one frozen value read from the environment by a composition root.

Why it is so: docs/adr/decisions/apps-cloud.md (settings.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from datetime import timedelta
from urllib.parse import urlsplit

from attrs import frozen

from nodeau.ports.errors import SettingsError

DEFAULT_URL = "https://api.nodeau.ai"
DEFAULTS_S = {
    "NODEAU_CLOUD_TIMEOUT_S": 10.0,
    "NODEAU_CLOUD_REPORT_INTERVAL_S": 300.0,
    "NODEAU_CLOUD_POLL_INTERVAL_S": 30.0,
    "NODEAU_CLOUD_SIGN_IN_WAIT_S": 900.0,
}


@frozen(kw_only=True)
class CloudSettings:
    url: str
    timeout_s: float
    report_interval: timedelta
    poll_interval: timedelta
    sign_in_wait: timedelta


def base_url(text: str, what: str = "NODEAU_CLOUD_URL") -> str:
    """``text`` as a base URL, or ``SettingsError`` saying what to give instead."""
    parts = urlsplit(text.strip())
    host = parts.hostname or ""
    if parts.scheme not in ("https", "http") or not host:
        raise SettingsError(f"{what} must be an https:// URL, got {text!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise SettingsError(f"{what} must be a plain base URL (no query, fragment or user)")
    if parts.scheme == "http" and not _loopback(host):
        raise SettingsError(
            f"{what} must be https:// (plain http:// is only for a loopback address), got {text!r}"
        )
    return text.strip().rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _seconds(env: Mapping[str, str], name: str) -> float:
    text = env.get(name, "").strip()
    if not text:
        return DEFAULTS_S[name]
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise SettingsError(f"{name} must be a number of seconds above zero, got {text!r}")
    return value


def cloud_settings(env: Mapping[str, str]) -> CloudSettings:
    """The settings from ``env``, each with its documented default."""
    return CloudSettings(
        url=base_url(env.get("NODEAU_CLOUD_URL") or DEFAULT_URL),
        timeout_s=_seconds(env, "NODEAU_CLOUD_TIMEOUT_S"),
        report_interval=timedelta(seconds=_seconds(env, "NODEAU_CLOUD_REPORT_INTERVAL_S")),
        poll_interval=timedelta(seconds=_seconds(env, "NODEAU_CLOUD_POLL_INTERVAL_S")),
        sign_in_wait=timedelta(seconds=_seconds(env, "NODEAU_CLOUD_SIGN_IN_WAIT_S")),
    )
