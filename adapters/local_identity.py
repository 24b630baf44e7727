"""Who is asking on one machine: the local user this process runs as, and their groups.

Read from the password and group databases (``pwd``, ``grp``) by the process's real user
id, never from ``$USER``, which anyone can set. A user or group id with no name (a
container without a passwd entry) is named by its number, as ``id`` shows it.
"""

from __future__ import annotations

import grp
import os
import pwd

from nodeau.domain.organisation import Requester


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


class LocalIdentity:
    """``Identity`` of the local user."""

    def requester(self) -> Requester:
        uid = os.getuid()
        gids = {os.getgid(), *os.getgroups()}
        return Requester(user=_user_name(uid), groups=frozenset(_group_name(g) for g in gids))
