"""Byte units, in a module of their own so that what reads only settings imports nothing
else of the domain (``nodeau.domain.memory`` gives them too, for the memory arithmetic).
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
