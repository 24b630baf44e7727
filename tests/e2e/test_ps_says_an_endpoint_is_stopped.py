"""After ``nodeau stop NAME`` (the endpoint only), ``ps`` and the dashboard say so.

Real parts: the installed ``nodeau``, a real llama-server, the endpoint and dashboard services.
Neither shows an address; the model stays loaded and the sentence says how to restart it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.builders.tiny_gguf import write_tiny_llama
from tests.support.real.cli import Cli
from tests.support.real.dashboard_cli import FRESH, http, whole_board

STOPPED = "loaded, endpoint stopped; nodeau run tiny brings it back"


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    c = Cli(tmp_path / "home", NODEAU_SIMULATED_GPUS="1 x 24 GiB")
    yield c
    c.stop_everything()


def ps_row(cli: Cli) -> dict[str, object]:
    rows = cli.json("ps")
    assert isinstance(rows, list)
    [row] = rows
    assert isinstance(row, dict)
    return row


def test_ps_and_the_dashboard_say_a_stopped_endpoint_and_show_no_address(
    cli: Cli, tmp_path: Path
) -> None:
    model = write_tiny_llama(tmp_path / "tiny.gguf", seed=3)
    assert cli("models", "import", str(model), "--alias", "tiny").returncode == 0
    assert cli("run", "tiny", "--unproved", "--context", "256").returncode == 0
    serving = ps_row(cli)
    url = serving["endpoint"]
    assert isinstance(url, str) and url.startswith("http://127.0.0.1:")
    assert str(serving["sentence"]).endswith("; nothing to do")

    stopped = cli("stop", "tiny")
    assert stopped.returncode == 0, stopped.stderr
    with pytest.raises(httpx.ConnectError):
        httpx.get(url.removesuffix("/v1") + "/health", timeout=10, trust_env=False)
    row = ps_row(cli)
    assert (row["state"], row["endpoint"]) == ("serving", None)
    assert str(row["sentence"]).endswith(f"; {STOPPED}")
    [line] = cli("ps", "-o", "wide").stdout.splitlines()[1:]
    assert url not in line and line.endswith(STOPPED)
    [_row, sentence] = cli("ps").stdout.splitlines()[1:]  # no address line: none listens
    assert sentence.startswith("  serving on ") and sentence.endswith(STOPPED)

    opened = cli.json("dashboard")
    assert isinstance(opened, dict)
    with http(str(opened["address"])) as client:
        board = whole_board(client, {"Authorization": f"Bearer {opened['token']}", **FRESH})
    [shown] = board["cli"]["ps"]
    assert (shown["state"], shown["endpoint"]) == ("serving", None)
    assert shown["sentence"].endswith(f"; {STOPPED}")
    assert board["workloads"]["targets"] == []  # the Playground offers no endpoint that is off

    again = cli("run", "tiny", "--unproved")
    assert again.returncode == 0, again.stderr
    back = ps_row(cli)
    assert back["endpoint"] == url
    assert str(back["sentence"]).endswith("; nothing to do")
