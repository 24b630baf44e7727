"""Nodeau Cloud's settings: documented defaults, overrides, and a clear line for bad values."""

from __future__ import annotations

from datetime import timedelta

import pytest

from nodeau.apps.cloud.settings import DEFAULT_URL, base_url, cloud_settings
from nodeau.ports.errors import SettingsError


def test_the_defaults_are_the_documented_ones() -> None:
    s = cloud_settings({})
    assert s.url == DEFAULT_URL == "https://api.nodeau.ai"
    assert s.timeout_s == 10.0
    assert s.report_interval == timedelta(minutes=5)
    assert s.poll_interval == timedelta(seconds=30)
    assert s.sign_in_wait == timedelta(minutes=15)


def test_each_setting_is_read_from_its_variable() -> None:
    s = cloud_settings(
        {
            "NODEAU_CLOUD_URL": "https://cloud.example.com/api/",
            "NODEAU_CLOUD_TIMEOUT_S": "2.5",
            "NODEAU_CLOUD_REPORT_INTERVAL_S": "60",
            "NODEAU_CLOUD_POLL_INTERVAL_S": "5",
            "NODEAU_CLOUD_SIGN_IN_WAIT_S": "120",
        }
    )
    assert s.url == "https://cloud.example.com/api"
    assert s.timeout_s == 2.5
    assert (s.report_interval, s.poll_interval) == (timedelta(minutes=1), timedelta(seconds=5))
    assert s.sign_in_wait == timedelta(minutes=2)


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf", "1e999"])
def test_a_duration_that_is_not_above_zero_is_refused(value: str) -> None:
    with pytest.raises(SettingsError) as refused:
        cloud_settings({"NODEAU_CLOUD_POLL_INTERVAL_S": value})
    assert str(refused.value) == (
        f"NODEAU_CLOUD_POLL_INTERVAL_S must be a number of seconds above zero, got {value!r}"
    )


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080",
        "http://localhost:1",
        "http://[::1]:9",
        "https://api.nodeau.ai",
        "https://10.0.0.5:8443/base",
    ],
)
def test_https_anywhere_and_plain_http_on_loopback_only(url: str) -> None:
    assert base_url(url) == url


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://api.nodeau.ai", "must be https:// (plain http:// is only for a loopback"),
        ("http://10.0.0.5", "must be https:// (plain http:// is only for a loopback"),
        ("ftp://api.nodeau.ai", "must be an https:// URL"),
        ("api.nodeau.ai", "must be an https:// URL"),
        ("https://", "must be an https:// URL"),
        ("https://user:pw@api.nodeau.ai", "must be a plain base URL"),
        ("https://api.nodeau.ai/?x=1", "must be a plain base URL"),
    ],
)
def test_any_other_url_is_refused_saying_what_to_give(url: str, said: str) -> None:
    with pytest.raises(SettingsError, match="^--url " + said.replace("(", r"\(")):
        base_url(url, "--url")
