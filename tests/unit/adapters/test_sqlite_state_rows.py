"""A stored row that does not read back, said whole (adapters/sqlite_state.py): every
field cattrs finds missing, in one line; and a row that is JSON but no object, with the
error Python gave."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodeau.ports.state import StateError
from tests.support.real.sqlite_store import admitted, sql


def test_an_admission_missing_every_field_names_each_one(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = admitted(path)
    sql(path, "UPDATE admissions SET decision = '{}' WHERE workload = 'chat'")
    with pytest.raises(StateError) as caught:
        store.admission("chat")
    assert str(caught.value) == (
        f"{path}: the admission of chat cannot be read (required field missing @ $.record; "
        "required field missing @ $.admitted; required field missing @ $.placement; "
        "required field missing @ $.decided_at)"
    )


def test_a_record_that_is_a_number_says_what_python_found(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    store = admitted(path)
    sql(path, "UPDATE workloads SET record = '5' WHERE name = 'chat'")
    with pytest.raises(StateError) as caught:
        store.snapshot()
    assert str(caught.value) == (
        f"{path}: the record of chat cannot be read (argument of type 'int' is not iterable)"
    )


@pytest.mark.parametrize("stored", ["[]", '"x"'])
def test_a_record_that_is_an_array_or_a_string_is_one_line_naming_the_file(
    tmp_path: Path, stored: str
) -> None:
    path = tmp_path / "state.sqlite3"
    store = admitted(path)
    sql(path, f"UPDATE workloads SET record = '{stored}' WHERE name = 'chat'")
    with pytest.raises(StateError) as caught:
        store.snapshot()
    assert str(caught.value).startswith(f"{path}: the record of chat cannot be read (")
    assert "\n" not in str(caught.value)
