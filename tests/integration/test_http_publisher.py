"""Fetching from a publisher over real HTTP on 127.0.0.1, with injected faults."""

from __future__ import annotations

import hashlib
import io
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nodeau.adapters.hashing import READ_BYTES, HashingThread, feed_file, hash_file
from nodeau.adapters.http_publisher import HttpPublisher, fetch_url
from nodeau.adapters.progress import PlainLines, duration_text, fetch_progress, size_text
from nodeau.domain.artifacts import ArtifactFile, CuratedEntry, Sha256
from nodeau.ports.models import DiskReserveError, FetchError, PartialFile
from tests.support.real.publisher import LocalPublisher, local_publisher

CHUNK = 64 * 1024
DATA = os.urandom(3 * 1024 * 1024 + 123)  # several chunks and a ragged end
WRONG = bytes(255 - b for b in DATA)  # what the wrong_bytes fault serves instead
EXPECTED = ArtifactFile(path="model.gguf", size_bytes=len(DATA), sha256=Sha256.of_bytes(DATA))
CUT = 1024 * 1024 + 17


@pytest.fixture
def publisher() -> Iterator[LocalPublisher]:
    with local_publisher() as running:
        yield running


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client() as c:  # one for the module: building its TLS context takes 0.1 s
        yield c


@pytest.fixture
def fetcher(client: httpx.Client) -> HttpPublisher:
    # a generous stall time-out: a loaded machine must not turn a slow test into a stall
    return HttpPublisher(client, chunk_bytes=CHUNK, stall_timeout_s=10.0)


class Recorder:
    """A FetchProgress that keeps every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, present: int, expected: int) -> None:
        self.calls.append((present, expected))


def fetch(fetcher: HttpPublisher, url: str, path: Path, progress: Recorder | None = None) -> Sha256:
    present = path.stat().st_size if path.exists() else 0
    partial = PartialFile(path=path, bytes_present=present)
    return fetcher.fetch_into(url, partial, EXPECTED, progress or Recorder())


def test_a_full_fetch_writes_the_file_and_returns_its_sha256(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA)
    progress = Recorder()
    target = tmp_path / "model.gguf.partial"
    computed = fetch(fetcher, url, target, progress)
    assert computed == EXPECTED.sha256
    assert computed.hex == hashlib.sha256(DATA).hexdigest()
    assert target.read_bytes() == DATA
    assert publisher.ranges("/model.gguf") == [None]
    presents = [p for p, _ in progress.calls]
    assert presents[0] == 0 and presents[-1] == len(DATA)
    assert presents == sorted(presents)
    assert len(presents) > len(DATA) // (2 * CHUNK)  # a call per chunk (a chunk ends on a piece)
    assert {e for _, e in progress.calls} == {len(DATA)}


def test_a_file_served_from_disk_arrives_whole(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    source = tmp_path / "published.gguf"
    source.write_bytes(DATA)
    url = publisher.serve("/published.gguf", source)
    assert fetch(fetcher, url, tmp_path / "partial") == EXPECTED.sha256
    assert hash_file(tmp_path / "partial") == EXPECTED.sha256


def test_a_cut_connection_keeps_what_arrived_and_the_next_fetch_resumes_with_range(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA, cut_after=CUT)
    target = tmp_path / "partial"
    with pytest.raises(FetchError) as caught:
        fetch(fetcher, url, target)
    message = str(caught.value)
    assert url in message and f"kept {CUT} of {len(DATA)} bytes" in message
    assert "\n" not in message
    assert target.read_bytes() == DATA[:CUT]

    publisher.serve("/model.gguf", DATA)  # the publisher is back to normal
    progress = Recorder()
    assert fetch(fetcher, url, target, progress) == EXPECTED.sha256
    assert target.read_bytes() == DATA
    assert publisher.ranges("/model.gguf") == [None, f"bytes={CUT}-"]
    assert progress.calls[0] == (CUT, len(DATA))  # the kept prefix counts from the start


def test_wrong_bytes_come_back_with_their_own_hash_not_the_expected_one(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA, wrong_bytes=True)
    computed = fetch(fetcher, url, tmp_path / "partial")
    assert computed != EXPECTED.sha256
    assert computed == Sha256.of_bytes(WRONG)


def test_a_stalled_publisher_is_a_fetch_error_and_keeps_the_bytes(
    publisher: LocalPublisher, client: httpx.Client, tmp_path: Path
) -> None:
    impatient = HttpPublisher(client, chunk_bytes=CHUNK, stall_timeout_s=0.5)
    url = publisher.serve("/model.gguf", DATA, stall_after=CUT, stall_s=10.0)
    target = tmp_path / "partial"
    with pytest.raises(FetchError, match=r"no byte arrived for 0\.5 s") as caught:
        fetch(impatient, url, target)
    assert str(caught.value).startswith(url)
    kept = target.read_bytes()
    assert len(kept) <= CUT and kept == DATA[: len(kept)]  # all of it, but for a starved machine


def test_an_error_status_is_a_fetch_error_naming_it(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA, status=500)
    with pytest.raises(FetchError, match=r"HTTP 500 Internal Server Error") as caught:
        fetch(fetcher, url, tmp_path / "partial")
    assert str(caught.value).startswith(url)
    assert (tmp_path / "partial").read_bytes() == b""


def test_a_missing_file_is_a_fetch_error_naming_404(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    with pytest.raises(FetchError, match=r"HTTP 404"):
        fetch(fetcher, publisher.url("/nothing.gguf"), tmp_path / "partial")


def test_a_publisher_that_ignores_range_is_followed_from_byte_zero(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA, ignore_range=True)
    target = tmp_path / "partial"
    target.write_bytes(DATA[:CUT])
    assert fetch(fetcher, url, target) == EXPECTED.sha256
    assert target.read_bytes() == DATA  # not the prefix followed by a whole second copy
    assert publisher.ranges("/model.gguf") == [f"bytes={CUT}-"]


def test_a_progress_callback_that_raises_aborts_and_keeps_the_partial(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA)
    target = tmp_path / "partial"

    def reserve_reached(present: int, _expected: int) -> None:
        if present >= CUT:
            raise DiskReserveError(f"{target}: fetching further would eat the free-disk reserve")

    with pytest.raises(DiskReserveError):
        fetcher.fetch_into(
            url, PartialFile(path=target, bytes_present=0), EXPECTED, reserve_reached
        )
    kept = target.read_bytes()
    assert CUT <= len(kept) < len(DATA)
    assert kept == DATA[: len(kept)]


@pytest.mark.parametrize("send_length", [True, False])
def test_more_bytes_than_the_catalog_lists_is_a_fetch_error(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path, send_length: bool
) -> None:
    url = publisher.serve("/model.gguf", DATA + b"extra", send_length=send_length)
    target = tmp_path / "partial"
    with pytest.raises(FetchError, match="bytes") as caught:
        fetch(fetcher, url, target)
    assert url in str(caught.value)
    assert len(target.read_bytes()) <= len(DATA)  # never more than the file can hold


def test_a_resume_from_a_publisher_whose_file_is_longer_is_refused(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA + b"extra")
    target = tmp_path / "partial"
    target.write_bytes(DATA[:CUT])
    with pytest.raises(FetchError) as caught:
        fetch(fetcher, url, target)
    assert str(caught.value) == (
        f"{url}: the publisher's file has {len(DATA) + 5} bytes, the catalog lists {len(DATA)}; "
        f"kept {CUT} of {len(DATA)} bytes to resume"
    )
    assert target.read_bytes() == DATA[:CUT]


def test_a_resume_past_the_end_of_the_publishers_file_is_refused(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA[:CUT])
    target = tmp_path / "partial"
    target.write_bytes(DATA[: CUT + 10])
    with pytest.raises(FetchError, match=r"no bytes past those already here \(HTTP 416\)"):
        fetch(fetcher, url, target)
    assert publisher.ranges("/model.gguf") == [f"bytes={CUT + 10}-"]


def test_a_full_disk_is_a_disk_reserve_error(
    publisher: LocalPublisher, fetcher: HttpPublisher
) -> None:
    url = publisher.serve("/model.gguf", DATA)
    full = Path("/dev/full")  # every write there fails with ENOSPC
    with pytest.raises(DiskReserveError) as caught:
        fetch(fetcher, url, full)
    assert str(caught.value) == "/dev/full: the disk is full"


def test_a_body_that_ends_early_is_a_fetch_error(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA[:CUT], send_length=False)
    target = tmp_path / "partial"
    with pytest.raises(FetchError, match="ended the file early"):
        fetch(fetcher, url, target)
    assert target.read_bytes() == DATA[:CUT]


def test_a_complete_partial_is_hashed_without_asking_the_publisher(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA)
    target = tmp_path / "partial"
    target.write_bytes(DATA)
    assert fetch(fetcher, url, target) == EXPECTED.sha256
    assert publisher.requests == ()


def test_a_partial_longer_than_the_file_is_discarded(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA)
    target = tmp_path / "partial"
    target.write_bytes(DATA + b"junk")
    assert fetch(fetcher, url, target) == EXPECTED.sha256
    assert target.read_bytes() == DATA
    assert publisher.ranges("/model.gguf") == [None]


def test_a_publisher_nobody_answers_at_is_a_fetch_error(
    fetcher: HttpPublisher, tmp_path: Path
) -> None:
    with socket.socket() as unused:  # a port that was free a moment ago and has no listener
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = f"http://127.0.0.1:{port}/model.gguf"
    with pytest.raises(FetchError, match="cannot reach the publisher") as caught:
        fetch(fetcher, url, tmp_path / "partial")
    assert str(caught.value).startswith(url)


def test_an_unwritable_partial_is_a_fetch_error_naming_it(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA)
    target = tmp_path / "missing-folder" / "partial"
    with pytest.raises(FetchError, match="cannot open for writing") as caught:
        fetch(fetcher, url, target)
    assert str(target) in str(caught.value)


def test_the_fetch_url_is_the_pinned_revision_in_the_hugging_face_layout() -> None:
    entry = CuratedEntry(
        name="qwen",
        publisher="Qwen",
        repo="Qwen/Qwen2.5-7B-Instruct-GGUF",
        revision="0123456789abcdef0123456789abcdef01234567",
        files=(EXPECTED, ArtifactFile(path="sub dir/b.gguf", size_bytes=1, sha256=EXPECTED.sha256)),
    )
    assert fetch_url(entry, EXPECTED) == (
        "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct-GGUF/resolve/"
        "0123456789abcdef0123456789abcdef01234567/model.gguf"
    )
    assert fetch_url(entry, entry.files[1], base_url="http://127.0.0.1:9/") == (
        "http://127.0.0.1:9/Qwen/Qwen2.5-7B-Instruct-GGUF/resolve/"
        "0123456789abcdef0123456789abcdef01234567/sub%20dir/b.gguf"
    )
    stranger = ArtifactFile(path="other.gguf", size_bytes=1, sha256=EXPECTED.sha256)
    with pytest.raises(ValueError, match="not a file of catalog entry qwen"):
        fetch_url(entry, stranger)


def test_a_fetch_at_its_fetch_url_from_the_local_publisher(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    entry = CuratedEntry(
        name="qwen", publisher="Qwen", repo="Qwen/Q", revision="a" * 40, files=(EXPECTED,)
    )
    url = fetch_url(entry, EXPECTED, base_url=publisher.base_url)
    publisher.serve(f"/Qwen/Q/resolve/{'a' * 40}/model.gguf", DATA)
    assert fetch(fetcher, url, tmp_path / "partial") == EXPECTED.sha256


def test_plain_progress_lines_during_a_real_fetch(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA)
    out = io.StringIO()
    with fetch_progress("model.gguf", stream=out, terminal=False) as progress:
        partial = PartialFile(path=tmp_path / "partial", bytes_present=0)
        assert fetcher.fetch_into(url, partial, EXPECTED, progress) == EXPECTED.sha256
    lines = out.getvalue().splitlines()
    assert lines[0] == "model.gguf: 0 B of 3.0 MiB (0%)"
    assert lines[-1].startswith("model.gguf: 3.0 MiB of 3.0 MiB (100%), ")
    assert " done in " in lines[-1]
    assert 2 <= len(lines) <= 12  # a line per tenth at most, not one per chunk


def test_a_progress_bar_on_a_terminal(
    publisher: LocalPublisher, fetcher: HttpPublisher, tmp_path: Path
) -> None:
    url = publisher.serve("/model.gguf", DATA)
    out = io.StringIO()
    with fetch_progress("model.gguf", stream=out, terminal=True) as progress:
        partial = PartialFile(path=tmp_path / "partial", bytes_present=0)
        assert fetcher.fetch_into(url, partial, EXPECTED, progress) == EXPECTED.sha256
    shown = out.getvalue()
    assert "model.gguf" in shown and "3.0/3.0 MiB" in shown


def test_plain_lines_say_size_rate_and_time_left() -> None:
    now = [100.0]
    lines: list[str] = []
    report = PlainLines("qwen.gguf", lines.append, clock=lambda: now[0], every_s=10.0)
    gib = 1024**3
    report(gib // 2, 5 * gib)  # resumed with half a GiB already here
    now[0] = 106.0
    report(gib // 2 + 100 * 1024**2, 5 * gib)  # still in the same tenth, 6 s later: quiet
    now[0] = 110.0
    report(gib // 2 + 500 * 1024**2, 5 * gib)  # same tenth, but 10 s since the last line
    now[0] = 150.0
    report(5 * gib, 5 * gib)
    report(5 * gib, 5 * gib)  # the end is said once
    assert lines == [
        "qwen.gguf: 512.0 MiB of 5.0 GiB (10%)",
        "qwen.gguf: 1012.0 MiB of 5.0 GiB (19%), 50.0 MiB/s, ETA 1m22s",
        "qwen.gguf: 5.0 GiB of 5.0 GiB (100%), 92.2 MiB/s, done in 50s",
    ]


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (5 * 1024**3, "5.0 GiB"),
        (2**60, "1024.0 PiB"),
    ],
)
def test_sizes_in_binary_units(count: int, text: str) -> None:
    assert size_text(count) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0s"), (59, "59s"), (200, "3m20s"), (3900, "1h05m"), (-3, "0s")]
)
def test_durations_at_a_glance(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


def test_hash_file_reads_the_whole_file_in_large_pieces(tmp_path: Path) -> None:
    path = tmp_path / "big.bin"
    data = DATA + DATA[:READ_BYTES]  # longer than one read, with a ragged end
    path.write_bytes(data)
    assert hash_file(path) == Sha256.of_bytes(data)


def test_a_kept_prefix_is_hashed_up_to_its_length_only(tmp_path: Path) -> None:
    path = tmp_path / "partial"
    path.write_bytes(DATA)
    hasher = hashlib.sha256()
    assert feed_file(hasher, path, limit=CUT) == CUT
    assert hasher.hexdigest() == hashlib.sha256(DATA[:CUT]).hexdigest()
    assert feed_file(hashlib.sha256(), path, limit=len(DATA) + 10) == len(DATA)


def test_the_hashing_thread_hashes_batches_in_the_order_fed() -> None:
    hasher = hashlib.sha256()
    with HashingThread(hasher, depth=2) as hashing:
        for start in range(0, len(DATA), CHUNK):
            hashing.feed(
                [DATA[start : start + CHUNK // 2], DATA[start + CHUNK // 2 : start + CHUNK]]
            )
    assert hasher.hexdigest() == EXPECTED.sha256.hex


class BrokenHasher:
    def update(self, _data: bytes) -> None:
        raise MemoryError("no memory for the hash")


def test_a_failure_in_the_hashing_thread_reaches_the_feeder() -> None:
    hashing = HashingThread(BrokenHasher(), depth=1)  # type: ignore[arg-type]
    with pytest.raises(MemoryError, match="no memory for the hash"), hashing:
        for _ in range(5):  # more batches than the queue holds: the worker keeps draining
            hashing.feed([b"x" * 4096])


def test_the_publisher_nodeau_uses_follows_a_redirect_as_a_hub_answers_one(
    publisher: LocalPublisher, tmp_path: Path
) -> None:
    """A hub answers a model's URL with a redirect to where its bytes are (Hugging Face's
    ``resolve`` URLs do); the publisher ``nodeau models pull`` builds follows it."""
    target = publisher.serve("/cdn/model.gguf", DATA)
    url = publisher.serve("/resolve/model.gguf", b"", moved_to=target)
    over_http = HttpPublisher.over_the_internet()
    try:
        got = fetch(over_http, url, tmp_path / "model.gguf")
    finally:
        over_http.close()
    assert got == EXPECTED.sha256
    assert (tmp_path / "model.gguf").read_bytes() == DATA
    assert [r.path for r in publisher.requests] == ["/resolve/model.gguf", "/cdn/model.gguf"]
