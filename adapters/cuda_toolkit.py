"""The CUDA toolkit a CUDA build compiles with: one found on the machine, or PyPI's wheels.

Found: ``$CUDA_HOME``, ``$CUDA_PATH``, ``nvcc`` on ``$PATH``, ``/usr/local/cuda``; else
NVIDIA's CUDA 13 wheels, pinned by SHA-256 and unpacked into one root with the names CMake
and nvcc look for, and the machine's driver library when it has one (docs/adr/0019).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from attrs import frozen

from nodeau.adapters.pypi_files import PinnedFile, fetch_pinned
from nodeau.ports.server_install import BuildProgress, InstallError

CUDA_VERSION = "13.0.88"  # nvcc's; every wheel below is of CUDA 13.0
WHEELS = (
    PinnedFile(
        project="nvidia-cuda-nvcc",
        filename="nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        sha256="56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03",
    ),
    PinnedFile(
        project="nvidia-cuda-crt",
        filename="nvidia_cuda_crt-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        sha256="2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4",
    ),
    PinnedFile(
        project="nvidia-nvvm",
        filename="nvidia_nvvm-13.0.88-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
        sha256="c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0",
    ),
    PinnedFile(
        project="nvidia-cuda-runtime",
        filename="nvidia_cuda_runtime-13.0.96-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        sha256="7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548",
    ),
    PinnedFile(
        project="nvidia-cuda-cccl",
        filename="nvidia_cuda_cccl-13.0.85-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        sha256="e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649",
    ),
    PinnedFile(
        project="nvidia-cublas",
        filename="nvidia_cublas-13.0.2.14-py3-none-manylinux_2_27_x86_64.whl",
        sha256="0cf238ffdbe46c00cb9aa98e7bca745c223a5ca5a53e686ac8b3e5a08fe80d6c",
    ),
)
RUNTIME_LIBRARIES = ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13")
MARK = "nodeau-toolkit.json"  # written last: the unpacked root is whole
_WHEEL_ROOT = Path("nvidia") / "cu13"
_RELEASE = re.compile(r"release [\d.]+, V([\d.]+)")
_LDCONFIG_CUDA = re.compile(r"^\s*libcuda\.so\.1 \(([^)]*)\) => (\S+)$", re.MULTILINE)
_DRIVER_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib", "/usr/lib")


@frozen(kw_only=True)
class Toolkit:
    """A CUDA toolkit: its root (``bin/nvcc`` under it), nvcc's version, where it came from."""

    root: Path
    version: str
    source: str

    @property
    def nvcc(self) -> Path:
        return self.root / "bin" / "nvcc"

    def describe(self) -> str:
        return f"CUDA {self.version} ({self.source}, {self.root})"


def found_toolkit(environ: Mapping[str, str]) -> Toolkit | None:
    """A toolkit installed on this machine, in the order the module docstring gives."""
    candidates: list[tuple[Path, str]] = []
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(name, "").strip():
            candidates.append((Path(environ[name]).expanduser(), f"${name}"))
    nvcc = shutil.which("nvcc", path=environ.get("PATH", os.defpath))
    if nvcc:
        candidates.append((Path(nvcc).resolve().parent.parent, "nvcc on PATH"))
    candidates.append((Path("/usr/local/cuda"), "/usr/local/cuda"))
    for root, how in candidates:
        version = nvcc_version(root / "bin" / "nvcc")
        if version is not None:
            return Toolkit(root=root, version=version, source=f"found on this machine: {how}")
    return None


def nvcc_version(nvcc: Path) -> str | None:
    """What ``nvcc --version`` says its release is (None: no nvcc there, or it cannot run)."""
    if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
        return None
    try:
        done = subprocess.run(
            [str(nvcc), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _RELEASE.search(done.stdout)
    return found.group(1) if found and done.returncode == 0 else None


def wheel_toolkit(cache: Path, *, environ: Mapping[str, str], progress: BuildProgress) -> Toolkit:
    """PyPI's CUDA 13.0 wheels unpacked under ``cache/<version>`` (fetched once, kept)."""
    home = cache / CUDA_VERSION
    root = home / _WHEEL_ROOT
    mark = home / MARK
    if _marked(mark) and nvcc_version(root / "bin" / "nvcc") == CUDA_VERSION:
        return Toolkit(root=root, version=CUDA_VERSION, source="PyPI's NVIDIA wheels")
    wheels = cache / "wheels"
    part = cache / f"{CUDA_VERSION}.part"
    try:
        shutil.rmtree(part, ignore_errors=True)
        for pinned in WHEELS:
            wheel = fetch_pinned(
                pinned, wheels / pinned.filename, environ=environ, progress=progress
            )
            progress(f"unpacking {pinned.project}", 0, None)
            _unpack(wheel, part)
        _names_cmake_expects(part / _WHEEL_ROOT)
        version = nvcc_version(part / _WHEEL_ROOT / "bin" / "nvcc")
        if version != CUDA_VERSION:
            raise InstallError(f"nvcc from the wheels does not run (it says {version})")
        (part / MARK).write_text(
            json.dumps({"wheels": {w.filename: w.sha256 for w in WHEELS}}, indent=1)
        )
        # whole, then put in place: a build still running on an older copy keeps its files
        old = cache / f"{CUDA_VERSION}.old"
        shutil.rmtree(old, ignore_errors=True)
        if home.exists():
            home.rename(old)
        part.rename(home)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        raise InstallError(f"unpacking the CUDA toolkit into {cache}: {exc}") from exc
    return Toolkit(root=root, version=CUDA_VERSION, source="PyPI's NVIDIA wheels")


def _marked(mark: Path) -> bool:
    try:
        kept = json.loads(mark.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(kept, dict) and kept.get("wheels") == {w.filename: w.sha256 for w in WHEELS}


def _unpack(wheel: Path, into: Path) -> None:
    """Every file of the wheel under ``into``, with its mode and modification time (so a
    build that compiled against it before sees nothing changed)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                target = into / info.filename
                if not target.resolve().is_relative_to(into.resolve()):
                    raise InstallError(
                        f"{wheel.name} names a file outside its root: {info.filename}"
                    )
                archive.extract(info, into)
                mode = (info.external_attr >> 16) & 0o777
                if mode and not info.is_dir():
                    target.chmod(mode)
                moment = datetime(*info.date_time).timestamp()
                os.utime(target, (moment, moment))
    except zipfile.BadZipFile as exc:
        raise InstallError(f"{wheel}: not a readable wheel ({exc})") from exc


def _names_cmake_expects(root: Path) -> None:
    """``lib64`` (nvcc's profile names it) and the unversioned library names CMake finds."""
    lib64 = root / "lib64"
    if not lib64.exists():
        lib64.symlink_to("lib")
    for versioned in RUNTIME_LIBRARIES:
        plain = root / "lib" / versioned.rsplit(".", 1)[0]
        if not plain.exists():
            plain.symlink_to(versioned)


def driver_library() -> Path | None:
    """This machine's NVIDIA driver library (``libcuda.so.1``), when it has one."""
    try:
        done = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, timeout=30, check=False
        )
        listed = [Path(p) for arch, p in _LDCONFIG_CUDA.findall(done.stdout) if "x86-64" in arch]
    except (OSError, subprocess.TimeoutExpired):
        listed = []
    found = [p for p in listed if p.exists()]
    found += [Path(d) / "libcuda.so.1" for d in _DRIVER_DIRS if (Path(d) / "libcuda.so.1").exists()]
    return found[0] if found else None
