"""``OrganisationPolicy``: the same contract for the file under NODEAU_HOME, the in-memory
fake the controller's unit tests use, and ConfigMap nodeau-organisation (tests/kube); and the
document's reader, fuzzed: any bytes at all give a policy or one line naming the problem.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.adapters.organisation_document import parse_organisation
from nodeau.adapters.organisation_file import FileOrganisationPolicy
from nodeau.domain.organisation import Organisation
from nodeau.ports.organisation import OrganisationError
from tests.support.contracts.organisation_policy_contract import POLICY_CONTRACT
from tests.support.fakes.fake_cluster import FakeOrganisationPolicy


@pytest.mark.parametrize("check", POLICY_CONTRACT, ids=lambda c: c.__name__)
@pytest.mark.parametrize("kind", ["file", "memory"])
def test_policy_contract(kind: str, check: Callable[[Any], None], tmp_path: Path) -> None:
    policy = FileOrganisationPolicy(tmp_path) if kind == "file" else FakeOrganisationPolicy()
    check(policy)


def test_a_kept_file_that_does_not_read_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "organisation.json").write_text('{"everyone": "boss"}')
    with pytest.raises(OrganisationError) as caught:
        FileOrganisationPolicy(tmp_path).read()
    assert caught.value.one_line() == (
        f"{tmp_path / 'organisation.json'}: everyone: 'boss' is not a role "
        "(viewer, operator, admin)"
    )


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (b"", "not JSON"),
        (b"\xff", "not UTF-8 text"),
        (b"[]", "the document must be a JSON object"),
        (b'{"limits": {}, "limits": {}}', "key 'limits' appears twice in one object"),
        (b'{"limit": {}}', "the document: unknown key 'limit'"),
        (b'{"limits": {"max_context_tokens": 0}}', "limits.max_context_tokens: must be above zero"),
        (
            b'{"limits": {"max_model_bytes": 1.5}}',
            "limits.max_model_bytes: expected a whole number",
        ),
        (b'{"limits": {"allowed_models": "qwen"}}', "limits.allowed_models: expected a list"),
        (b'{"roles": {"admin": [" alice"]}}', "roles.admin[0]: ' alice' is not a name"),
        (b'{"roles": {"owner": []}}', "roles: unknown key 'owner'"),
        (b'{"quotas": {"teams": {"ml": {"max_cards": 1}}}}', "unknown key 'max_cards'"),
        (b'{"contact": 7}', "contact: expected a string, got a number"),
        (b'{"limits": {"max_context_tokens": NaN}}', "NaN is not a JSON number"),
    ],
)
def test_malformed_documents_say_what_and_where(document: bytes, problem: str) -> None:
    with pytest.raises(OrganisationError) as caught:
        parse_organisation(document, "policy.json")
    assert caught.value.one_line().startswith("policy.json: ")
    assert problem in caught.value.one_line()


@given(st.binary(max_size=300))
def test_any_bytes_give_a_policy_or_one_line(data: bytes) -> None:
    try:
        found = parse_organisation(data, "policy.json")
    except OrganisationError as exc:
        line = exc.one_line()
        assert line.startswith("policy.json: ") and "\n" not in line
    else:
        assert isinstance(found, Organisation)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "limits": JSONISH,
            "roles": JSONISH,
            "everyone": JSONISH,
            "quotas": JSONISH,
            "contact": JSONISH,
        },
    )
)
def test_any_json_of_the_documents_shape_gives_a_policy_or_one_line(doc: dict[str, Any]) -> None:
    try:
        found = parse_organisation(json.dumps(doc).encode(), "policy.json")
    except OrganisationError as exc:
        assert exc.one_line().startswith("policy.json: ")
    else:
        assert isinstance(found, Organisation)
