"""Web origins a workload's endpoint may be told to allow (``--allow-origin``).

An origin is written the way a browser sends it: ``scheme://host`` or
``scheme://host:port``, lower case, no default port, no path. ``null`` (sandboxed
frames, ``file:`` pages) and ``*`` are never an origin to allow: each must be named.
"""

from __future__ import annotations

from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


def parse_origin(text: str) -> str:
    """``text`` as a web origin to allow, in the form a browser sends it (``scheme://host``
    or ``scheme://host:port``: lower case, no default port, no trailing slash); ValueError
    when it is not one, or is ``null`` or ``*``."""
    given = text.strip()
    if given in ("*", "null"):
        raise ValueError(f"{given!r} cannot be allowed: name each origin, as scheme://host[:port]")
    try:
        parts = urlsplit(given)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{given!r} is not an origin ({exc})") from exc
    host = parts.hostname
    extra = parts.path not in ("", "/") or parts.username or given.endswith(("?", "#"))
    if not parts.scheme or not host or extra or parts.query or parts.fragment:
        raise ValueError(f"{given!r} is not an origin: scheme://host[:port], nothing more")
    scheme = parts.scheme.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"
