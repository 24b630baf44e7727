"""What a proxied route takes: a JSON object, sent as ``application/json``.

Why it is so: docs/adr/decisions/apps-endpoint.md (bodies.py).
"""

from __future__ import annotations

import json
import re

from starlette.responses import Response

from nodeau.apps.endpoint.answers import not_a_json_request, not_an_object, not_json

Headers = list[tuple[bytes, bytes]]

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def request_object(path: str, headers: Headers, body: bytes) -> dict[str, object] | Response:
    """The JSON object a request to the route ``path`` sent as ``application/json``, or the
    400 of one that is not such a request."""
    types = [value for name, value in headers if name == b"content-type"]
    if len(types) != 1 or types[0].partition(b";")[0].strip().lower() != b"application/json":
        return not_a_json_request(path, [t.decode("latin-1") for t in types])
    try:
        value = _DECODER.decode(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return not_json(path, f"it is not UTF-8: {exc.reason} at byte {exc.start}")
    except json.JSONDecodeError as exc:
        return not_json(path, f"{exc.msg} at line {exc.lineno} column {exc.colno}")
    except ValueError as exc:
        # NaN or Infinity (_no_constant), or a number too long for Python's int, whose
        # message ends in advice to Python programmers (after the ';')
        return not_json(path, str(exc).partition(";")[0])
    except RecursionError:
        return not_json(path, "it is nested too deeply")
    if not isinstance(value, dict):
        return not_an_object(path, _kind(value))
    if b"\\u" in body and _SURROGATE_ESCAPE.search(body) and _unpaired_surrogate(value):
        return not_json(path, "a string holds half of a UTF-16 surrogate pair")
    return value


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return "a number"


def _unpaired_surrogate(value: object) -> bool:
    """Whether a string in ``value`` holds a lone surrogate (UTF-8 cannot encode one)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
