"""The organisation's policy as a JSON document (cattrs), read strictly.

The format is documented in docs/organisation-format.md. Every key is optional; an
unknown key, a value of the wrong JSON type, a key given twice, a role or count that is
not one is refused with the path of the field and what is wrong (``OrganisationError``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import NewType

import cattrs
from attrs import field, frozen
from cattrs.cols import is_sequence

from nodeau.adapters.strict_json import (
    FieldProblem,
    exactly,
    first_problem,
    list_of,
    no_constant,
    no_duplicate_keys,
    positive_count,
)
from nodeau.domain.limits import OrgLimits, OrgQuota, Role
from nodeau.domain.organisation import Organisation
from nodeau.ports.organisation import OrganisationError

MAX_BYTES = 1024 * 1024

_Count = NewType("_Count", int)
_Name = NewType("_Name", str)


@frozen(kw_only=True)
class _LimitsDoc:
    max_context_tokens: _Count | None = None
    max_model_bytes: _Count | None = None
    allowed_models: tuple[_Name, ...] | None = None
    allowed_machines: tuple[_Name, ...] | None = None


@frozen(kw_only=True)
class _RolesDoc:
    admin: tuple[_Name, ...] = ()
    operator: tuple[_Name, ...] = ()
    viewer: tuple[_Name, ...] = ()


@frozen(kw_only=True)
class _QuotaDoc:
    max_gpus_held: _Count | None = None
    max_workloads: _Count | None = None


@frozen(kw_only=True)
class _QuotasDoc:
    users: Mapping[_Name, _QuotaDoc] = field(factory=dict)
    teams: Mapping[_Name, _QuotaDoc] = field(factory=dict)


@frozen(kw_only=True)
class _OrganisationDoc:
    limits: _LimitsDoc = field(factory=_LimitsDoc)
    roles: _RolesDoc = field(factory=_RolesDoc)
    everyone: Role = Role.VIEWER
    quotas: _QuotasDoc = field(factory=_QuotasDoc)
    contact: _Name | None = None


def _name(value: object, _type: object) -> str:
    text = exactly(str, "a string")(value, _type)
    if not text.strip() or not text.isprintable() or text != text.strip():
        raise FieldProblem(f"{text!r} is not a name (printable, no surrounding spaces)")
    return text


def _role(value: object, _type: object) -> Role:
    text = exactly(str, "a string")(value, _type)
    try:
        return Role(text)
    except ValueError:
        known = ", ".join(r.value for r in Role)
        raise FieldProblem(f"{text!r} is not a role ({known})") from None


def _converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(_Count, positive_count)
    converter.register_structure_hook(_Name, _name)
    converter.register_structure_hook(Role, _role)
    converter.register_structure_hook_factory(is_sequence, lambda t: list_of(t, converter))
    return converter


_CONVERTER = _converter()


def _quota(doc: _QuotaDoc) -> OrgQuota:
    return OrgQuota(max_gpus_held=doc.max_gpus_held, max_workloads=doc.max_workloads)


def _names(given: tuple[_Name, ...] | None) -> frozenset[str] | None:
    return None if given is None else frozenset(given)


def _organisation(doc: _OrganisationDoc) -> Organisation:
    roles = {
        Role.ADMIN: frozenset(doc.roles.admin),
        Role.OPERATOR: frozenset(doc.roles.operator),
        Role.VIEWER: frozenset(doc.roles.viewer),
    }
    return Organisation(
        limits=OrgLimits(
            max_context_tokens=doc.limits.max_context_tokens,
            max_model_bytes=doc.limits.max_model_bytes,
            allowed_models=_names(doc.limits.allowed_models),
            allowed_machines=_names(doc.limits.allowed_machines),
        ),
        roles=MappingProxyType({role: names for role, names in roles.items() if names}),
        everyone=doc.everyone,
        user_quotas=MappingProxyType({n: _quota(q) for n, q in doc.quotas.users.items()}),
        team_quotas=MappingProxyType({n: _quota(q) for n, q in doc.quotas.teams.items()}),
        contact=doc.contact,
    )


def parse_organisation(data: bytes, where: str) -> Organisation:
    """The policy in ``data``; ``OrganisationError`` naming ``where`` and the first problem."""
    if len(data) > MAX_BYTES:
        raise OrganisationError(f"{where}: larger than {MAX_BYTES} bytes")
    try:
        raw = json.loads(
            data.decode("utf-8"), object_pairs_hook=no_duplicate_keys, parse_constant=no_constant
        )
    except UnicodeDecodeError:
        raise OrganisationError(f"{where}: not UTF-8 text") from None
    except FieldProblem as exc:
        raise OrganisationError(f"{where}: {exc}") from None
    except (ValueError, RecursionError):
        raise OrganisationError(f"{where}: not JSON") from None
    if type(raw) is not dict:
        raise OrganisationError(f"{where}: the document must be a JSON object")
    try:
        return _organisation(_CONVERTER.structure(raw, _OrganisationDoc))
    except Exception as exc:  # cattrs reports every problem as an exception (group)
        found = first_problem(exc)
        if found is None:
            raise OrganisationError(f"{where}: {exc}") from None
        raise OrganisationError(f"{where}: {found.where or 'the document'}: {found.text}") from None
