"""Asking a llama-server binary what it can use: its version, backends and devices.

``--version``, ``--list-devices`` (and CUDA's reason when it sees no card) and the libraries
it links; or the same answer as a probe wrote it on a fleet's machine. Kept per binary and
per cards shown in one JSON file, so asking again costs a file read.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

import cattrs

from nodeau.domain.model_server import CUDA, ServerAbilities, ServerDevice
from nodeau.ports.runtime import RuntimeFailure

ASK_TIMEOUT_S = 60.0  # a CUDA build initialises every card it is shown
SERVER = "llama-server"
_VERSION = re.compile(r"^version:\s*(.+)$", re.MULTILINE)
_DEVICE = re.compile(r"^\s+(\S+): (.*) \((\d+) MiB, (\d+) MiB free\)\s*$")
_LOADED = re.compile(r"load_backend: loaded (\S+) backend", re.MULTILINE)
_CUDA_INIT = re.compile(r"ggml_cuda_init: (failed to initialize CUDA: .+|found \d+ CUDA)")
_CUDA_FAILED = re.compile(r"ggml_cuda_init: failed to initialize CUDA: (.+)$", re.MULTILINE)
_LIBRARY = re.compile(r"^\s*(\S+\.so[.\d]*)\s+=>\s+(\S+)", re.MULTILINE)
_BACKEND_LIBRARY = re.compile(r"^libggml-([a-z0-9]+)\.so")
_NOT_BACKENDS = frozenset({"base", "cpu"})
_NAMES = {"cuda": CUDA, "vulkan": "Vulkan", "hip": "ROCm", "metal": "Metal", "sycl": "SYCL"}
_MIB = 1024 * 1024
_converter = cattrs.Converter(forbid_extra_keys=True)


def parse_devices(text: str) -> tuple[ServerDevice, ...]:
    """The devices ``--list-devices`` printed (none for ``(none)``)."""
    found = []
    for line in text.splitlines():
        m = _DEVICE.match(line)
        if m:
            name, description, total, free = m.groups()
            found.append(
                ServerDevice(
                    name=name,
                    description=description,
                    total_bytes=int(total) * _MIB,
                    free_bytes=int(free) * _MIB,
                )
            )
    return tuple(found)


def parse_backends(output: str, libraries: tuple[str, ...]) -> tuple[str, ...]:
    """The backends besides the CPU's: those whose devices it listed, those it says it
    loaded or initialised, and those whose ``libggml-<name>.so`` it links."""
    names: list[str] = [d.backend for d in parse_devices(output)]
    names += _LOADED.findall(output)
    if _CUDA_INIT.search(output):
        names.append(CUDA)
    for library in libraries:
        m = _BACKEND_LIBRARY.match(Path(library).name)
        if m and m.group(1) not in _NOT_BACKENDS:
            names.append(_NAMES.get(m.group(1), m.group(1)))
    kept = [n for n in names if n.upper() not in {"CPU", "BLAS"}]
    return tuple(dict.fromkeys(kept))


def linked_libraries(binary: Path) -> dict[str, str]:
    """Every shared library the binary loads, by name, where the loader finds it (``ldd``);
    empty where ``ldd`` is not there."""
    try:
        done = subprocess.run(
            ["ldd", str(binary)], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return dict(_LIBRARY.findall(done.stdout))


def ask_binary(binary: Path, environ: Mapping[str, str]) -> ServerAbilities:
    """Ask ``binary`` itself, in ``environ`` (the cards it may see), what it can use."""
    version_out = _run(binary, "--version", environ)
    devices_out = _run(binary, "--list-devices", environ)
    return from_answer(
        version_out + devices_out, str(binary), libraries=tuple(linked_libraries(binary))
    )


def from_answer(text: str, program: str, *, libraries: tuple[str, ...] = ()) -> ServerAbilities:
    """What a llama-server said of itself (its ``--version`` and ``--list-devices`` output,
    as one text: what the agent's probe writes on its machine), for ``program``."""
    found = _VERSION.search(text)
    failed = _CUDA_FAILED.search(text)
    return ServerAbilities(
        server=SERVER,
        program=program,
        version=found.group(1).strip() if found else "(version unknown)",
        backends=parse_backends(text, libraries),
        devices=parse_devices(text),
        note=failed.group(1).strip() if failed else "",
    )


def answer_file(path: Path, program: str) -> ServerAbilities | None:
    """The answer a probe wrote to ``path`` (None: not written); RuntimeFailure when it
    cannot be read or names no ``--list-devices`` answer."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RuntimeFailure(f"{path}: the model server's answer is unreadable: {exc}") from exc
    if "Available devices:" not in text:
        raise RuntimeFailure(f"{path}: no --list-devices answer in it (the probe failed?)")
    return from_answer(text, program)


def _run(binary: Path, flag: str, environ: Mapping[str, str]) -> str:
    try:
        done = subprocess.run(
            [str(binary), flag],
            capture_output=True,
            text=True,
            timeout=ASK_TIMEOUT_S,
            check=False,
            env=dict(environ),
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeFailure(f"{binary} {flag} did not answer in {ASK_TIMEOUT_S:.0f} s") from exc
    except OSError as exc:
        raise RuntimeFailure(f"{binary}: cannot run it: {exc.strerror or exc}") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(nothing)"])[-1]
        raise RuntimeFailure(f"{binary} {flag} exited with {done.returncode}: {last}")
    return done.stdout + done.stderr


class KeptAbilities:
    """``ask_binary``'s answers kept in one JSON file, per binary and per cards shown."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def abilities(self, binary: Path, environ: Mapping[str, str]) -> ServerAbilities:
        """The binary's answer, asked once per binary state and per ``CUDA_VISIBLE_DEVICES``."""
        key = _key(binary, environ)
        kept = self._read()
        if key in kept:
            try:
                return _converter.structure(kept[key], ServerAbilities)
            except (cattrs.BaseValidationError, ValueError, TypeError):
                pass  # written by another version: ask again
        answer = ask_binary(binary, environ)
        kept[key] = _converter.unstructure(answer)
        self._write(kept)
        return answer

    def _read(self) -> dict[str, object]:
        try:
            loaded = json.loads(self._path.read_text())
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def _write(self, kept: dict[str, object]) -> None:
        """Written whole to a file beside it, then moved over it: a reader sees one or the
        other. Kept answers of binaries that are gone are dropped."""
        live = {k: v for k, v in kept.items() if Path(k.split("|", 1)[0]).exists()}
        self._path.parent.mkdir(parents=True, exist_ok=True)
        part = self._path.with_name(f".{self._path.name}.{os.getpid()}")
        part.write_text(json.dumps(live, indent=1, sort_keys=True))
        part.replace(self._path)


def _key(binary: Path, environ: Mapping[str, str]) -> str:
    try:
        real = binary.resolve(strict=True)
        st = real.stat()
    except OSError as exc:
        raise RuntimeFailure(f"{binary}: no model server there ({exc.strerror})") from exc
    visible = environ.get("CUDA_VISIBLE_DEVICES", "(all)")
    return f"{real}|{st.st_size}|{st.st_mtime_ns}|{visible}"
