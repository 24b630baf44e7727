"""A model no one card holds runs split by layers across the fewest free cards that hold it.

A model one card holds still takes one card; every view shows every card of a split; stopping
frees them all. A real llama-server on three simulated cards, so the model runs on the CPU (the
split itself is llama.cpp's: ADR 0031 measured it across simulated devices).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.dashboard_cli import FRESH, http, whole_board

# The big model's KV cache at 65,536 tokens is 2 GiB: no 4 GiB card holds it with its
# runtime and margin, so it must split.
CONTEXT = "65536"


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="3 x 4 GiB")
    yield c
    c.stop_everything()


def rows(cli: Cli) -> dict[str, dict[str, object]]:
    listed = cli.json("ps")
    assert isinstance(listed, list)
    return {str(r["name"]): r for r in listed}


def test_a_model_larger_than_any_card_is_split_across_two_and_answers(
    cli: Cli, tmp_path: Path
) -> None:
    big = write_tiny_llama(tmp_path / "big.gguf", n_layers=8, n_embd=1024, n_head=8,
                           n_head_kv=8, n_ff=256, context=65536, quant="f16")  # fmt: skip
    small = write_tiny_llama(tmp_path / "small.gguf", seed=4)
    for path, alias in ((big, "big"), (small, "small")):
        assert cli("models", "import", str(path), "--alias", alias).returncode == 0

    ran = cli("run", "big", "--unproved", "--context", CONTEXT)
    assert ran.returncode == 0, ran.stderr
    row = rows(cli)["big"]
    cards = row["cards"]
    assert isinstance(cards, list) and len(cards) == 2 and row["gpu"] == cards[0]
    assert row["state"] == "serving"
    [line] = [x for x in cli("ps", "-o", "wide").stdout.splitlines() if x.startswith("big ")]
    assert ",".join(str(c) for c in cards) in line

    explained = cli("service", "explain", "big")
    assert explained.returncode == 0, explained.stderr
    text = explained.stdout
    assert "no one card holds it: split by layers across 2 cards (--tensor-split " in text
    assert text.count(" slot(s) (estimated):") == 2
    placed = cli("placement", "explain", "big")
    assert placed.returncode == 0, placed.stderr
    text = placed.stdout
    assert "split by layers across 2 of testbox's 3 cards" in text
    for card in cards:
        assert any(x.startswith("reservation: ") and x.endswith(f" on {card}")
                   for x in text.splitlines()), text  # fmt: skip

    listed = cli("fleet", "list").stdout
    for card in cards:
        assert f"{card} (4.00 GiB, held by big)" in listed

    opened = cli.json("dashboard")
    assert isinstance(opened, dict)
    with http(str(opened["address"])) as client:
        board = whole_board(client, {"Authorization": f"Bearer {opened['token']}", **FRESH})
    [shown] = board["cli"]["ps"]
    assert shown["cards"] == cards  # the page's table lists every card of the row

    endpoint = row["endpoint"]
    assert isinstance(endpoint, str)
    chat = openai.OpenAI(base_url=endpoint, api_key="unused", timeout=120)
    answer = chat.chat.completions.create(
        model="big", messages=[{"role": "user", "content": "hi"}], max_tokens=4
    )
    assert answer.choices[0].message.content is not None

    ran = cli("run", "small", "--unproved", "--context", "256")  # one card holds it
    assert ran.returncode == 0, ran.stderr
    one = rows(cli)["small"]
    assert one["cards"] == [one["gpu"]] and one["gpu"] not in cards

    stopped = cli.json("stop", "big", "--workload")
    assert isinstance(stopped, dict) and stopped["cards"] == cards
    assert (
        stopped["sentence"] == f"big: endpoint and model stopped; {cards[0]}, {cards[1]} are free"
    )
    assert set(rows(cli)) == {"small"}
    again = cli("run", "big", "--unproved", "--context", CONTEXT)  # both cards free again
    assert again.returncode == 0, again.stderr
    assert rows(cli)["big"]["cards"] == cards


def test_a_model_no_two_free_cards_hold_is_refused_saying_so(cli: Cli, tmp_path: Path) -> None:
    huge = write_tiny_llama(tmp_path / "huge.gguf", n_layers=8, n_embd=1024, n_head=8,
                            n_head_kv=8, n_ff=256, context=262144, quant="f16")  # fmt: skip
    assert cli("models", "import", str(huge), "--alias", "huge").returncode == 0
    refused = cli("run", "huge", "--unproved", "--context", "262144")
    assert refused.returncode == 2, refused.stderr
    assert "capacity.no-card-large-enough" in refused.stderr
    assert "nor do the free cards of any one machine hold it split by layers" in refused.stderr
    assert rows(cli) == {}
