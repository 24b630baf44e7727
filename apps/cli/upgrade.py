"""``nodeau fleet upgrade``: mark a machine upgrading, or take the mark off, on either plane.

While the mark holds nothing on the machine moves and nothing new is placed there (a
fleet's controller reads the Node label ``nodeau.ai/upgrading``); on one machine the mark
is kept as drain's is, and nothing moves there anyway. Marking restarts and moves nothing.
"""

from __future__ import annotations

from typing import Annotated

from cyclopts import Parameter

from nodeau.apps.cli import bootstrap
from nodeau.apps.cli.render import to_json


def upgrade(
    *, node: str, done: Annotated[bool, Parameter(negative="")] = False, json: bool = False
) -> int:
    """Mark a machine upgrading: nothing on it moves and nothing new is placed there until
    --done takes the mark off. Nothing is restarted or moved by marking.

    Parameters
    ----------
    node
        The machine (on Kubernetes, its Node name).
    done
        The upgrade is over: take the mark off.
    json
        Print what was done as JSON: plane, machine, upgrading, sentence.
    """

    marked = bootstrap.plane().machines.mark_upgrading(node, upgrading=not done)
    print(to_json(marked) if json else marked.sentence)
    return 0
