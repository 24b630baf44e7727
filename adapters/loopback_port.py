"""Whether a loopback port accepts connections now: the one question ``nodeau ps`` asks of
a workload's endpoint, and what starting an endpoint waits for.

Light on purpose (``socket`` only): ``ps`` asks it of every service it lists.
"""

from __future__ import annotations

import socket


def listening(port: int, timeout_s: float = 1.0) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port`` now (a closed loopback
    port refuses at once; the connection is closed again with nothing sent)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False
