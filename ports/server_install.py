"""Port of installing a model server: building llama-server into the user's cache.

An installer builds one flavour (the CPU, or CUDA for named architectures) from
sources pinned by SHA-256, reuses a build it finished before, and says what it
built; ``builds`` lists what it finished, newest first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from attrs import frozen

from nodeau.domain.model_server import BuildAsk
from nodeau.ports.errors import NodeauError

__all__ = [
    "BuildAsk",
    "BuildProgress",
    "BuiltServer",
    "FetchedBuild",
    "InstallError",
    "ServerInstaller",
]

BuildProgress = Callable[[str, float, float | None], None]
"""Called with (the step, how far it is, its whole: None when unknown) as an install goes."""


class InstallError(NodeauError):
    """A model server could not be fetched, configured or built; one line for a person."""


@frozen(kw_only=True)
class BuiltServer:
    """One finished build, as its record says."""

    llama_cpp_python: str  # the sdist's version, e.g. "0.3.36"
    llama_cpp_commit: str  # the llama.cpp commit it vendors
    flavour: str
    backend: str
    cuda_archs: tuple[str, ...]
    binary: str
    version: str  # what the binary says of itself (``--version``)
    backends: tuple[str, ...]  # what it says it can use besides the CPU
    toolkit: str  # "" for a CPU build, else the CUDA toolkit: version and where it came from
    memory_pool: str  # a CUDA build's: "virtual memory (VMM)" or "legacy (no VMM)"; "" for CPU
    built_at: str  # ISO 8601, UTC
    build_seconds: float
    reused: bool = False  # this install found it finished and built nothing


@frozen(kw_only=True)
class FetchedBuild:
    """What a build compiles from, fetched and checked: the llama.cpp sources, and for CUDA
    the toolkit (its version and where it came from)."""

    sources: Path
    toolkit: str | None  # None: a CPU build needs none


class ServerInstaller(Protocol):
    """Builds llama-server into a cache."""

    def prepare(self, ask: BuildAsk, progress: BuildProgress) -> FetchedBuild:
        """Fetch and check what ``ask``'s build compiles from, building nothing (to build
        later without a network)."""
        ...

    def install(self, ask: BuildAsk, progress: BuildProgress) -> BuiltServer:
        """The finished build of ``ask``: reused when there is one, else made (InstallError
        says why it could not be, and where its log is)."""
        ...

    def builds(self) -> tuple[BuiltServer, ...]:
        """Every finished build in the cache, newest first."""
        ...
