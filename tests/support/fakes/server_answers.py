"""What a llama-server answers when asked what it can use, and a stand-in that answers so.

The answers are those the vendored llama.cpp prints: a CUDA build on two cards, a CUDA
build that sees no card, a CPU build. ``stand_in`` writes a shell script that prints one
of them as a CUDA build would, counting its calls.
"""

from __future__ import annotations

from pathlib import Path

CUDA_ANSWER = """\
ggml_cuda_init: found 2 CUDA devices (Total VRAM: 287542 MiB):
  Device 0: NVIDIA H200, compute capability 9.0, VMM: yes, VRAM: 143771 MiB
  Device 1: NVIDIA H200, compute capability 9.0, VMM: yes, VRAM: 143771 MiB
Available devices:
  CUDA0: NVIDIA H200 (143771 MiB, 143001 MiB free)
  CUDA1: NVIDIA H200 (143771 MiB, 12 MiB free)
"""
CUDA_NO_CARD = """\
ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected
Available devices:
  (none)
"""
CPU_ANSWER = "Available devices:\n  (none)\n"


def stand_in(path: Path, answer: str, *, counter: Path, code: int = 0) -> Path:
    """A llama-server stand-in: ``--version`` and ``--list-devices`` as a CUDA build answers
    (to stderr, as llama.cpp logs), each call counted in ``counter``."""
    path.write_text(
        "#!/bin/sh\n"
        f'echo "$1 $CUDA_VISIBLE_DEVICES" >> "{counter}"\n'
        'if [ "$1" = --version ]; then\n'
        "  echo 'version: 9.9.9 (build 7, commit abc1234)' >&2\n"
        "  echo 'built with GNU 12.2.0 for Linux x86_64' >&2\n"
        "  exit 0\nfi\n"
        f"cat >&2 <<'EOF'\n{answer}EOF\n"
        f"exit {code}\n"
    )
    path.chmod(0o755)
    return path
