"""How a machine is served, by its operating system: a Mac is never a fleet node.

The product's concepts: a Mac runs standalone, on its own execution plane, and is
not a Kubernetes node; so ``nodeau join`` refuses there and ``nodeau environment``
says so. Any other machine is served on its own (a fleet of one) or joins a fleet.
"""

from __future__ import annotations

from attrs import frozen

MACOS = "darwin"  # sys.platform on macOS


@frozen(kw_only=True)
class Serving:
    """How a machine on ``platform`` is served, and whether it may join a fleet."""

    platform: str
    fleet_node: bool  # whether ``nodeau join`` can make it a node of a fleet on Kubernetes
    sentence: str


def how_served(platform: str) -> Serving:
    """How a machine on ``platform`` (``sys.platform``'s value) is served."""
    if platform == MACOS:
        return Serving(
            platform=platform,
            fleet_node=False,
            sentence=(
                "standalone, on its own execution plane: a Mac is never a node of a fleet "
                "(nodeau join refuses)"
            ),
        )
    return Serving(
        platform=platform,
        fleet_node=True,
        sentence=(
            "on its own (a fleet of one), or as a node of a fleet on Kubernetes once it "
            "joins one (nodeau join)"
        ),
    )


def join_refusal(platform: str) -> str | None:
    """Why a machine on ``platform`` cannot join a fleet; None when it can."""
    if how_served(platform).fleet_node:
        return None
    return (
        "a Mac is never a node of a fleet: it runs standalone, on its own execution plane "
        "(nodeau run serves models here as it is); nothing was run or written"
    )
