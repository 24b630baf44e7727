"""Building llama.cpp's llama-server from the llama-cpp-python sdist, into the user's cache.

The sdist (SHA-256 pinned) is unpacked once; each flavour (``cpu``, ``cuda-90``) is a CMake
build folder beside it, finished only once its record is written, last: a finished one is
reused, an interrupted one goes on. Flags and reasons: docs/adr/0019.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import cattrs
from attrs import evolve

from nodeau.adapters import cuda_toolkit
from nodeau.adapters.cuda_toolkit import Toolkit
from nodeau.adapters.pypi_files import PinnedFile, fetch_pinned
from nodeau.adapters.server_abilities import ask_binary
from nodeau.domain.model_server import BuildAsk
from nodeau.ports.server_install import BuildProgress, BuiltServer, FetchedBuild, InstallError

LLAMA_CPP_PYTHON = "0.3.36"
LLAMA_CPP_COMMIT = "0c1e570"  # the llama.cpp its sdist vendors
SDIST = PinnedFile(
    project="llama-cpp-python",
    filename=f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz",
    sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
)
TARGETS = ("llama-server", "llama-fit-params")
RECORD = "nodeau-build.json"
LOG = "nodeau-build.log"
# GGML_NATIVE=OFF: the native build uses AMX where a VM cannot run it (SIGILL on Q8_0);
# no web UI download, no OpenSSL or curl: the server is reached through the endpoint
COMMON_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
VMM = "virtual memory (VMM)"
NO_VMM = "legacy (no VMM: no NVIDIA driver library where it was built)"
_PERCENT = re.compile(r"^\[\s*(\d+)%\]")
_ERROR = re.compile(r"\berror\b", re.IGNORECASE)
_converter = cattrs.Converter(forbid_extra_keys=True)


def cmake_flags(
    ask: BuildAsk, *, toolkit: Toolkit | None, driver: Path | None, ccache: str | None
) -> tuple[str, ...]:
    """The configure flags of ``ask``'s build, beyond source and build folders."""
    flags = list(COMMON_FLAGS)
    if ccache:
        flags += [
            f"-DCMAKE_C_COMPILER_LAUNCHER={ccache}",
            f"-DCMAKE_CXX_COMPILER_LAUNCHER={ccache}",
        ]
    if ask.backend == "cuda":
        if toolkit is None:
            raise ValueError("a CUDA build needs a toolkit")
        flags += [
            "-DGGML_CUDA=ON",
            f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(ask.cuda_archs)}",
            f"-DCUDAToolkit_ROOT={toolkit.root}",
            f"-DCMAKE_CUDA_COMPILER={toolkit.nvcc}",
            # nvcc names the toolkit's library folder as implicit, so CMake leaves it out of
            # the run path: without it the link of llama-server cannot find libcudart
            f"-DCMAKE_BUILD_RPATH={toolkit.root / 'lib64'};{toolkit.root / 'lib'}",
        ]
        if driver is not None:
            flags.append(f"-DCUDA_cuda_driver_LIBRARY={driver}")
        else:
            flags.append("-DGGML_CUDA_NO_VMM=ON")
    return tuple(flags)


class LlamaServerBuilder:
    """``ServerInstaller`` over a cache folder: ``<cache>/<llama-cpp-python version>/``."""

    def __init__(
        self,
        cache: Path,
        *,
        cuda_cache: Path,
        environ: Mapping[str, str],
        jobs: int | None = None,
    ) -> None:
        """``cache``: where builds live; ``cuda_cache``: where PyPI's CUDA wheels are kept;
        ``environ``: what the compilers run in (and where the index is); ``jobs``: parallel
        compiles (default: one per core)."""
        self._home = cache / LLAMA_CPP_PYTHON
        self._cuda_cache = cuda_cache
        self._environ = dict(environ)
        self._jobs = jobs or os.cpu_count() or 1

    def folder(self, ask: BuildAsk) -> Path:
        return self._home / ask.flavour

    def builds(self) -> tuple[BuiltServer, ...]:
        found = [b for p in self._home.glob(f"*/{RECORD}") if (b := _read_record(p)) is not None]
        return tuple(sorted(found, key=lambda b: b.built_at, reverse=True))

    def fetch(self, ask: BuildAsk, progress: BuildProgress) -> tuple[Path, Toolkit | None]:
        """What ``ask``'s build compiles from, fetched and checked, building nothing: the
        llama.cpp sources, and for CUDA the toolkit."""
        source = self._source(progress)
        return source, self._toolkit(progress) if ask.backend == "cuda" else None

    def prepare(self, ask: BuildAsk, progress: BuildProgress) -> FetchedBuild:
        source, toolkit = self.fetch(ask, progress)
        return FetchedBuild(sources=source, toolkit=toolkit.describe() if toolkit else None)

    def install(self, ask: BuildAsk, progress: BuildProgress) -> BuiltServer:
        folder = self.folder(ask)
        kept = _read_record(folder / RECORD)
        if kept is not None and Path(kept.binary).is_file():
            return _reused(kept)
        began = time.monotonic()
        source, toolkit = self.fetch(ask, progress)
        driver = cuda_toolkit.driver_library() if ask.backend == "cuda" else None
        found = shutil.which("ccache", path=self._environ.get("PATH", os.defpath))
        ccache = "ccache" if found else None  # by name: the compile finds it on PATH
        flags = cmake_flags(ask, toolkit=toolkit, driver=driver, ccache=ccache)
        configure = ["cmake", "-S", str(source), "-B", str(folder), *flags]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            return self._build(ask, folder, configure, toolkit, driver, began, progress)
        except OSError as exc:
            raise InstallError(f"building in {folder}: {exc}") from exc

    def _build(
        self,
        ask: BuildAsk,
        folder: Path,
        configure: list[str],
        toolkit: Toolkit | None,
        driver: Path | None,
        began: float,
        progress: BuildProgress,
    ) -> BuiltServer:
        log = folder / LOG
        with log.open("w") as out:
            progress("configuring (cmake)", 0, None)
            self._step(configure, out, log)
            command = ["cmake", "--build", str(folder), "--target", *TARGETS, "-j", str(self._jobs)]
            self._compile(command, out, log, progress)
        binary = folder / "bin" / "llama-server"
        said = ask_binary(binary, self._environ)
        built = BuiltServer(
            llama_cpp_python=LLAMA_CPP_PYTHON,
            llama_cpp_commit=LLAMA_CPP_COMMIT,
            flavour=ask.flavour,
            backend=ask.backend,
            cuda_archs=ask.cuda_archs,
            binary=str(binary),
            version=said.version,
            backends=said.backends,
            toolkit=toolkit.describe() if toolkit else "",
            memory_pool="" if toolkit is None else (VMM if driver else NO_VMM),
            built_at=datetime.now(UTC).isoformat(timespec="seconds"),
            build_seconds=round(time.monotonic() - began, 1),
        )
        if ask.backend == "cuda" and "CUDA" not in built.backends:
            raise InstallError(f"{binary} was built with CUDA but does not say so; see {log}")
        record = folder / RECORD
        record.with_suffix(".part").write_text(json.dumps(_converter.unstructure(built), indent=1))
        record.with_suffix(".part").replace(record)
        return built

    def _source(self, progress: BuildProgress) -> Path:
        """The sdist's vendored llama.cpp, unpacked once (a half-unpacked tree is redone)."""
        source = self._home / "src"
        done = self._home / "src.unpacked"
        tree = source / "vendor" / "llama.cpp"
        if done.exists() and (tree / "CMakeLists.txt").is_file():
            return tree
        sdist = fetch_pinned(
            SDIST, self._home / SDIST.filename, environ=self._environ, progress=progress
        )
        progress("unpacking the llama.cpp sources", 0, None)
        shutil.rmtree(source, ignore_errors=True)
        try:
            with tarfile.open(sdist) as archive:
                archive.extractall(source, filter=_strip_top)
        except (tarfile.TarError, OSError) as exc:
            raise InstallError(f"{sdist}: cannot unpack it ({exc})") from exc
        done.touch()
        return tree

    def _toolkit(self, progress: BuildProgress) -> Toolkit:
        found = cuda_toolkit.found_toolkit(self._environ)
        if found is not None:
            return found
        return cuda_toolkit.wheel_toolkit(
            self._cuda_cache, environ=self._environ, progress=progress
        )

    def _step(self, command: list[str], out: TextIO, log: Path) -> None:
        try:
            done = subprocess.run(
                command, stdout=out, stderr=subprocess.STDOUT, env=self._environ, check=False
            )
        except OSError as exc:
            raise InstallError(
                f"{command[0]}: cannot run it ({exc.strerror}); is cmake installed?"
            ) from exc
        if done.returncode != 0:
            raise InstallError(f"{' '.join(command[:2])} failed ({_last_error(log)}); log: {log}")

    def _compile(self, command: list[str], out: TextIO, log: Path, progress: BuildProgress) -> None:
        step = f"compiling {', '.join(TARGETS)} ({self._jobs} at once)"
        progress(step, 0, 100)
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self._environ, text=True
        ) as running:
            assert running.stdout is not None
            for line in running.stdout:
                out.write(line)
                m = _PERCENT.match(line)
                if m:
                    progress(step, int(m.group(1)), 100)
        if running.returncode != 0:
            raise InstallError(f"compiling failed ({_last_error(log)}); log: {log}")
        progress(step, 100, 100)


def _strip_top(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    """The sdist's members without their top folder, through tarfile's own data filter."""
    parts = member.name.split("/", 1)
    if len(parts) < 2 or not parts[1]:
        return None
    member = member.replace(name=parts[1], deep=False)
    if member.islnk() or member.issym():
        top = member.linkname.split("/", 1)
        if member.islnk() and len(top) == 2:
            member = member.replace(linkname=top[1], deep=False)
    return tarfile.data_filter(member, path)


def _read_record(path: Path) -> BuiltServer | None:
    try:
        return _converter.structure(json.loads(path.read_text()), BuiltServer)
    except (OSError, ValueError, TypeError, cattrs.BaseValidationError):
        return None


def _reused(kept: BuiltServer) -> BuiltServer:
    return evolve(kept, reused=True)


def _last_error(log: Path) -> str:
    """The first error the log names (CMake's with the line that says what), else its last
    line."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    except OSError:
        return "no log"
    lines = [line for line in lines if line]
    for at, line in enumerate(lines):
        if line.startswith("CMake Error") and at + 1 < len(lines):
            return _shortened(f"{line} {lines[at + 1]}")
        if _ERROR.search(line) and "Configuring incomplete" not in line:
            return _shortened(line)
    return _shortened(lines[-1] if lines else "nothing logged")


def _shortened(text: str) -> str:
    return text if len(text) <= 240 else text[:237] + "..."
