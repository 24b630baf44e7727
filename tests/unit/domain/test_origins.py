"""Allowed web origins (``--allow-origin``): kept in the form a browser sends, or refused."""

from __future__ import annotations

import pytest

from nodeau.domain.origins import parse_origin


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("HTTPS://Chat.Example.ORG", "https://chat.example.org"),
        ("https://chat.example.org:443/", "https://chat.example.org"),
        ("http://chat.example.org:80", "http://chat.example.org"),
        ("https://chat.example.org:80", "https://chat.example.org:80"),  # not https's default
        ("http://chat.example.org:443", "http://chat.example.org:443"),  # not http's default
        ("app://notes:9000", "app://notes:9000"),  # a scheme with no default port keeps it
        ("\thttp://127.0.0.1:5173\n", "http://127.0.0.1:5173"),
        ("http://[fe80::1]", "http://[fe80::1]"),
        ("http://[::1]:80", "http://[::1]"),
    ],
)
def test_an_origin_is_kept_as_a_browser_sends_it(given: str, origin: str) -> None:
    assert parse_origin(given) == origin


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (" * ", "'*' cannot be allowed: name each origin, as scheme://host[:port]"),
        ("null", "'null' cannot be allowed: name each origin, as scheme://host[:port]"),
        ("https://", "'https://' is not an origin: scheme://host[:port], nothing more"),
        (
            "//chat.example.org",
            "'//chat.example.org' is not an origin: scheme://host[:port], nothing more",
        ),
        (
            "https://chat.example.org/#",
            "'https://chat.example.org/#' is not an origin: scheme://host[:port], nothing more",
        ),
        (
            "https://chat.example.org?",
            "'https://chat.example.org?' is not an origin: scheme://host[:port], nothing more",
        ),
        (
            "https://chat.example.org#top",
            "'https://chat.example.org#top' is not an origin: scheme://host[:port], nothing more",
        ),
        (
            "https://u:p@chat.example.org",
            "'https://u:p@chat.example.org' is not an origin: scheme://host[:port], nothing more",
        ),
        (
            "https://chat.example.org:x",
            "'https://chat.example.org:x' is not an origin "
            "(Port could not be cast to integer value as 'x')",
        ),
    ],
)
def test_anything_else_is_refused_with_what_an_origin_is(given: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_origin(given)
    assert str(caught.value) == message
