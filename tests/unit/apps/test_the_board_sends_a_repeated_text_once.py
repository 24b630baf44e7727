"""The page's document sends a long text repeated in its tables once
(apps/dashboard/repeated_texts.py), and the data route sends the page's sections alone
unless asked for the CLI's JSON too (apps/dashboard/board_encoding.py)."""

from __future__ import annotations

import copy
import gzip
import json
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.apps.cli import ps_command
from nodeau.apps.cli.render import to_json
from nodeau.apps.copies.commands import CopyListing
from nodeau.apps.dashboard.board import page_board, read_board, read_views
from nodeau.apps.dashboard.board_encoding import EncodedBoard
from nodeau.apps.dashboard.repeated_texts import SHORTEST, compacted, expanded
from nodeau.apps.planes.plane import Plane
from nodeau.apps.recovery.commands import RecoveryListing
from tests.support.builders.dashboard_views import NOW, FakePlane, fleet, machine, plan, workload

REFUSED = (
    "refused (capacity): capacity.no-free-card: every card large enough is held: "
    + ", ".join(f"GPU-{i} on m{i // 4} by svc-{i}" for i in range(400))
)

texts = st.sampled_from(["-", "serving", "x" * SHORTEST, "y" * (SHORTEST - 1), REFUSED, "é" * 40])
tables = st.lists(st.lists(texts, min_size=1, max_size=4), max_size=6)


@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), tables), tables)
def test_compacting_then_expanding_gives_the_document_back(
    sections: dict[str, list[list[str]]], top: list[list[str]]
) -> None:
    document: dict[str, Any] = {
        "plane": REFUSED,  # not in a table: kept as it is
        "rows": top,
        "sections": {k: {"headers": ["A"], "rows": v} for k, v in sections.items()},
        "cli": {"rows": [[1, 2]]},  # the CLI's JSON is never compacted
    }
    before = copy.deepcopy(document)
    sent = json.loads(json.dumps(compacted(document)))
    assert sent["plane"] == REFUSED and sent["cli"] == {"rows": [[1, 2]]}
    assert expanded(sent) == before


def test_a_long_text_repeated_in_the_tables_is_sent_once_and_short_ones_as_they_are() -> None:
    sent = compacted(
        {
            "workloads": {"rows": [["a", REFUSED], ["b", REFUSED], ["c", "once " * 10]]},
            "recovery": {"rows": [["a", REFUSED, "-"], ["b", "-", "-"]]},
        }
    )
    assert sent["texts"] == [REFUSED]
    assert sent["workloads"]["rows"] == [["a", 0], ["b", 0], ["c", "once " * 10]]
    assert sent["recovery"]["rows"] == [["a", 0, "-"], ["b", "-", "-"]]


def test_a_table_cell_that_is_not_text_is_refused() -> None:
    with pytest.raises(TypeError, match="a table cell must be text"):
        compacted({"rows": [["a", 3]]})


def refused_fleet() -> FakePlane:
    refused = (
        workload(f"r{i}", "refused", sentence=REFUSED, machine=None, gpu=None, endpoint=None)
        for i in range(50)
    )
    views = (workload("chat"), *refused)
    return FakePlane(
        machines=fleet(machine("box-a")), workloads=views, batches=(),
        copies=CopyListing(plane="p", copies=()),
        recovery=RecoveryListing(plane="p", control_plane="none", services=()), plan=plan(),
    )  # fmt: skip


def test_the_page_gets_its_sections_without_the_cli_json_and_each_repeated_text_once() -> None:
    plane = cast(Plane, refused_fleet())
    board = EncodedBoard(read_views(plane, lambda: (), NOW))
    page = json.loads(gzip.decompress(board.page.gzip))
    assert json.loads(board.page.json) == page
    assert "cli" not in page
    assert page["texts"] == [REFUSED]
    assert page["workloads"]["targets"] == ["chat"]  # the Playground's choices
    assert len(board.page.json) < 2 * len(REFUSED)  # once, not 50 times
    # expanded, it is what the page shows: the CLI's own rows
    assert expanded(page) == json.loads(json.dumps(page_board(board.views)))
    assert expanded(page)["workloads"]["rows"] == [
        list(ps_command.row(w)) for w in plane.serving.workloads()
    ]


def test_whoever_asks_gets_the_cli_json_of_the_same_read_beside_the_page() -> None:
    plane = cast(Plane, refused_fleet())
    board = EncodedBoard(read_views(plane, lambda: (), NOW))
    whole = json.loads(board.whole().json)
    assert whole["read_at"] == json.loads(board.page.json)["read_at"] == NOW.isoformat()
    assert whole["cli"]["ps"] == json.loads(to_json(plane.serving.workloads()))
    assert board.whole() is board.whole()  # made once
    assert expanded(whole) == json.loads(json.dumps(read_board(plane, lambda: (), NOW)))
