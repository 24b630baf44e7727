"""The buffers llama.cpp reports at load, read from a llama-server log.

Why it is so: docs/adr/decisions/adapters.md (runtime_buffers.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from attrs import field, frozen

from nodeau.domain.checks import not_negative

MIB = 1024 * 1024

_BUFFER = re.compile(
    r"(?P<backend>[A-Za-z0-9_]+)\s+(?P<kind>model|KV|compute|output) buffer size =\s*"
    r"(?P<mib>\d{1,9}(?:\.\d{1,6})?) MiB"
)


@frozen(kw_only=True)
class ReportedBuffers:
    """What the runtime said it allocated at load, in bytes, by kind of buffer."""

    model_bytes: int = field(validator=not_negative)
    kv_bytes: int = field(validator=not_negative)
    compute_bytes: int = field(validator=not_negative)
    output_bytes: int = field(validator=not_negative)
    repack_bytes: int = field(validator=not_negative, default=0)

    @property
    def total_bytes(self) -> int:
        return self.model_bytes + self.kv_bytes + self.compute_bytes + self.output_bytes


def reported_buffers(log: str) -> ReportedBuffers | None:
    """The buffers of the last load in ``log``; None when it lacks the model, KV-or-compute
    and output lines (a log below verbosity 4, a load that failed, or not a llama.cpp log)."""
    model: list[int] = []
    repack: list[int] = []
    kv: list[int] = []
    output: list[int] = []
    compute: dict[str, int] = {}
    for line in log.splitlines():
        found = _BUFFER.search(line)
        if found is None:
            continue
        kind, size = found["kind"], round(float(found["mib"]) * MIB)
        if kind == "model":
            if kv or output or compute:  # a new load starts: forget the previous one
                model, repack, kv, output, compute = [], [], [], [], {}
            (repack if found["backend"].endswith("_REPACK") else model).append(size)
        elif kind == "KV":
            kv.append(size)
        elif kind == "output":
            output.append(size)
        else:
            compute[found["backend"]] = size
    if not model or not compute or not output:
        return None
    return ReportedBuffers(
        model_bytes=sum(model),
        kv_bytes=sum(kv),
        compute_bytes=sum(compute.values()),
        output_bytes=sum(output),
        repack_bytes=sum(repack),
    )


def reported_total(log_path: Path) -> int | None:
    """The total of the buffers a server's log reports (repacked copies left out); None
    when the log is missing or reports none."""
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = reported_buffers(text)
    return found.total_bytes if found is not None and found.total_bytes > 0 else None
