"""``nodeau organisation``'s roles: every role, least powerful first, each with its entries
in name order, a role nobody holds shown empty."""

from __future__ import annotations

from types import MappingProxyType

from nodeau.domain.limits import Role
from nodeau.domain.organisation import Organisation, roles_table


def test_every_role_least_powerful_first_with_its_entries_in_name_order() -> None:
    org = Organisation(
        roles=MappingProxyType(
            {Role.ADMIN: frozenset({"zed", "amy"}), Role.VIEWER: frozenset({"group:ops"})}
        )
    )
    table = roles_table(org)
    assert list(table.items()) == [
        ("viewer", ("group:ops",)),
        ("operator", ()),
        ("admin", ("amy", "zed")),
    ]
