"""Ports of the model side: reading model files, the verified cache, fetching.

Every adapter maps its library's failures to the errors here, each a single
line that names the file (or URL) and the problem, so a command can print it
as it is and exit non-zero.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from attrs import frozen

from nodeau.domain.artifacts import ArtifactFile, Sha256
from nodeau.domain.cache import CachedFile
from nodeau.domain.catalog import Catalog
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.errors import NodeauError


class ModelError(NodeauError):
    """Base of the model side's expected failures; ``str()`` is one line for a person."""


class ModelFileCause(str, enum.Enum):
    """Why a file is not a model file Nodeau can read: one value per failure a reader
    checks for, so a test or a caller can tell the failures apart without parsing the
    message. The value is the code; add new ones, never reword one."""

    NO_FILE = "no-file"
    UNREADABLE = "unreadable"  # the operating system refused the read
    NOT_A_FILE = "not-a-file"  # a directory, a device, a socket
    EMPTY = "empty"
    BAD_MAGIC = "bad-magic"
    TRUNCATED_HEADER = "truncated-header"
    UNSUPPORTED_VERSION = "unsupported-version"
    BEYOND_FILE = "beyond-file"  # a count or length the rest of the file cannot hold
    OVER_LIMIT = "over-limit"  # one value, or the number of values, past the reader's bound
    BAD_VALUE_TYPE = "bad-value-type"  # a metadata value type the format does not define
    NESTED_TOO_DEEP = "nested-too-deep"
    NOT_UTF8 = "not-utf8"  # a key, tensor name or text value
    DUPLICATE = "duplicate"  # a metadata key or tensor name given twice
    BAD_ALIGNMENT = "bad-alignment"
    BAD_TENSOR_TYPE = "bad-tensor-type"
    BAD_TENSOR_SHAPE = "bad-tensor-shape"
    OVERFLOW = "overflow"  # a tensor's offset or size past 64 bits
    TENSOR_OUTSIDE_FILE = "tensor-outside-file"
    TENSOR_MISPLACED = "tensor-misplaced"  # not where the tensor before it ends, as llama.cpp reads
    MISSING_KEY = "missing-key"
    WRONG_TYPE = "wrong-type"  # a metadata value of a type its key does not take
    BAD_VALUE = "bad-value"  # a value of the right type out of its range, or not a name
    NO_TENSORS = "no-tensors"
    NO_VOCABULARY = "no-vocabulary"
    OUT_OF_MEMORY = "out-of-memory"


class ModelFileError(ModelError):
    """A file is not a well-formed model file.

    ``cause`` says which failure, where the adapter tells them apart (the GGUF
    inspector always does); None where it does not (the cache's own failures).
    """

    def __init__(
        self, path: Path | str, problem: str, *, cause: ModelFileCause | None = None
    ) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem
        self.cause = cause


class ChecksumMismatch(ModelError):
    """The bytes are not the ones expected; the copy was discarded."""

    def __init__(self, name: str, expected: Sha256, computed: Sha256) -> None:
        super().__init__(
            f"{name}: wrong bytes (expected SHA-256 {expected}, got {computed}); "
            "the file was discarded and nothing was counted verified"
        )
        self.name = name
        self.expected = expected
        self.computed = computed


class FetchError(ModelError):
    """A fetch from a publisher failed (network, HTTP status, stall); what was received is kept."""


class DiskReserveError(ModelError):
    """Fetching or storing would eat into the free-disk reserve."""


class CatalogError(ModelError):
    """A catalog document is missing or malformed."""


class ModelInspector(Protocol):
    """Reads a model file's own metadata (GGUF)."""

    def inspect(self, path: Path) -> ModelSummary:
        """The summary of the GGUF file at ``path``.

        Raises ModelFileError, and nothing else, for anything that is not a
        well-formed GGUF file (a directory, an empty file, bad magic, a
        truncated file, absurd counts or lengths, wrong types), its ``cause``
        set to which. Never hangs: the work is bounded by the file's size.
        """
        ...


@frozen(kw_only=True)
class PartialFile:
    """Where a fetch writes, and how many bytes of it are already there."""

    path: Path
    bytes_present: int


@frozen(kw_only=True)
class ImportedFile:
    """A file taken into the cache by import."""

    sha256: Sha256
    size_bytes: int
    path: Path
    linked: bool  # a hard link to the user's file (True) or a copy (False)


class ModelStore(Protocol):
    """One machine's model cache, content-addressed by SHA-256, under a root folder.

    Downloaded and verified are kept apart and persist across restarts. A
    file only ever appears under its final name after its hash matched; a
    partial or damaged file never counts as verified.
    """

    @property
    def machine(self) -> str: ...

    def import_file(self, source: Path, progress: ImportProgress | None = None) -> ImportedFile:
        """Hash ``source`` and store it (hard link where possible, else a copy).

        The user's file is never moved or changed. The stored copy is verified
        when its hash is recorded. Raises ModelFileError for a path that is not
        a readable regular file, DiskReserveError when a copy would eat into the
        reserve. ``progress`` is told each step (``hashing``, then ``copying`` when
        a copy is made) as its bytes are read.
        """
        ...

    def remove(self, sha256: Sha256) -> int:
        """Delete this machine's stored copy of a file, any fetch of it in progress, and
        its facts; the bytes freed (0 when it held none). Where an import hard-linked the
        user's file, only the cache's link goes: the user's file stays."""
        ...

    def files(self) -> tuple[CachedFile, ...]:
        """Every file this machine holds or is fetching, with its facts.

        A file whose size or modification time changed since it was verified
        is reported without its verification.
        """
        ...

    def verify(self, sha256: Sha256) -> CachedFile:
        """Re-read the stored copy, recompute its SHA-256, record and return the result.

        Raises ModelFileError when this machine holds no such file.
        """
        ...

    def verified_path(self, sha256: Sha256) -> Path | None:
        """The stored file, only if it is verified now; None otherwise."""
        ...

    def partial(self, expected: ArtifactFile) -> PartialFile:
        """The temporary file a fetch of ``expected`` appends to, and its current size."""
        ...

    def commit(self, expected: ArtifactFile, computed: Sha256) -> CachedFile:
        """Move a completed fetch to its final name if ``computed`` is the expected hash.

        On a mismatch the partial file is deleted and ChecksumMismatch raised;
        nothing is recorded as verified.
        """
        ...

    def free_bytes(self) -> int:
        """Free bytes on the cache's file system, less the configured reserve."""
        ...

    def exclusive_fetch(self, on_wait: Callable[[str], None]) -> AbstractContextManager[None]:
        """Hold this machine's fetch lock: one fetch at a time per machine.

        If another process holds it, ``on_wait`` is called once with a sentence
        saying so, then this waits.
        """
        ...


FetchProgress = Callable[[int, int], None]
"""Called with (bytes present, bytes expected) as a fetch advances; may raise to abort it."""

ImportProgress = Callable[[str, int, int], None]
"""Called with (step, bytes done, bytes in all) as an import reads its file."""


class Publisher(Protocol):
    """Where curated files come from: a URL at a pinned revision."""

    def fetch_into(
        self, url: str, partial: PartialFile, expected: ArtifactFile, progress: FetchProgress
    ) -> Sha256:
        """Append the file's remaining bytes to ``partial`` and return the SHA-256 of the whole.

        Resumes with an HTTP Range request from ``partial.bytes_present``. The
        new bytes are hashed as they arrive (a fetch is one pass over them); a
        prefix kept from an earlier attempt is hashed once first. Raises
        FetchError (keeping what arrived) or DiskReserveError (from ``progress``).
        """
        ...


class CatalogSource(Protocol):
    """Where the curated catalog is read from."""

    def load(self) -> Catalog:
        """The catalog, or CatalogError naming the document and the problem."""
        ...
