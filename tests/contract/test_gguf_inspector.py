"""The ModelInspector contract against the gguf-package adapter, on real tiny GGUF files."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFEndian, GGUFReader, GGUFValueType, GGUFWriter

from nodeau.adapters import gguf_inspector
from nodeau.adapters.gguf_inspector import GgufModelInspector
from nodeau.domain.card_split import LayerWeights
from nodeau.domain.memory import Architecture
from nodeau.domain.model_info import ModelSummary
from nodeau.ports.models import ModelFileError, ModelInspector
from tests.support.builders.tiny_gguf import VOCAB_SIZE, part_offsets, write_tiny_llama

U32, STR = GGUFValueType.UINT32, GGUFValueType.STRING
REQUIRED = (
    "general.architecture",
    "llama.block_count",
    "llama.embedding_length",
    "llama.attention.head_count",
    "llama.context_length",
)
HUGE = 2**62


@pytest.fixture
def inspector() -> ModelInspector:
    return GgufModelInspector()


def refusal(inspector: ModelInspector, path: Path) -> str:
    """The one-line message ``inspect`` refuses ``path`` with."""
    with pytest.raises(ModelFileError) as caught:
        inspector.inspect(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message
    assert "\r" not in message
    assert caught.value.path == str(path)
    return message


def patched(path: Path, offset: int, fmt: str, value: int | bytes) -> Path:
    """``path`` with one packed value written over the bytes at ``offset``."""
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    path.write_bytes(bytes(data))
    return path


def expected_tensor_bytes(
    *, quant: str, n_layers: int, n_embd: int, n_head: int, n_head_kv: int, n_ff: int
) -> int:
    """Bytes of the tiny model's tensors, counted from its shapes (not from the file)."""
    per_element = {"f32": 4.0, "f16": 2.0, "q8_0": 34 / 32}[quant]
    kv_rows = n_head_kv * (n_embd // n_head)
    per_layer = 2 * n_embd * n_embd + 2 * kv_rows * n_embd + 3 * n_ff * n_embd
    weights = 2 * VOCAB_SIZE * n_embd + n_layers * per_layer
    norms = (2 * n_layers + 1) * n_embd * 4
    return int(weights * per_element) + norms


def expected_layers(
    *, quant: str, n_layers: int, n_embd: int, n_head: int, n_head_kv: int, n_ff: int
) -> LayerWeights:
    """The same tensors by where a layer split puts them: the embeddings, each layer (its
    weights and two norms), the output weights and norm."""
    per_element = {"f32": 4.0, "f16": 2.0, "q8_0": 34 / 32}[quant]
    kv_rows = n_head_kv * (n_embd // n_head)
    per_layer = 2 * n_embd * n_embd + 2 * kv_rows * n_embd + 3 * n_ff * n_embd
    embeddings = int(VOCAB_SIZE * n_embd * per_element)
    return LayerWeights(
        input_bytes=embeddings,
        layer_bytes=(int(per_layer * per_element) + 2 * n_embd * 4,) * n_layers,
        output_bytes=embeddings + n_embd * 4,
    )


SHAPES = [
    pytest.param("f32", 2, 64, 4, 4, 128, 256, "ALL_F32", "F32", id="f32-notes-model"),
    pytest.param("f16", 4, 256, 8, 2, 512, 1024, "MOSTLY_F16", "F16", id="f16-gqa"),
    pytest.param("q8_0", 1, 32, 2, 1, 64, 128, "MOSTLY_Q8_0", "Q8_0", id="q8_0-one-layer"),
    pytest.param("q8_0", 3, 128, 8, 8, 96, 2048, "MOSTLY_Q8_0", "Q8_0", id="q8_0-three-layers"),
]


@pytest.mark.parametrize(
    ("quant", "n_layers", "n_embd", "n_head", "n_head_kv", "n_ff", "context", "ftype", "qname"),
    SHAPES,
)
def test_a_tiny_model_is_summarised_exactly(
    inspector: ModelInspector,
    tmp_path: Path,
    quant: str,
    n_layers: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    n_ff: int,
    context: int,
    ftype: str,
    qname: str,
) -> None:
    shape = dict(n_layers=n_layers, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv, n_ff=n_ff)
    path = write_tiny_llama(tmp_path / "m.gguf", context=context, quant=quant, **shape)  # type: ignore[arg-type]
    assert inspector.inspect(path) == ModelSummary(
        architecture=Architecture(
            name="llama",
            n_layers=n_layers,
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=n_head_kv,
            key_length=n_embd // n_head,
            value_length=n_embd // n_head,
            n_vocab=355,
            n_ff=n_ff,
            context_length=context,
        ),
        name="tiny-llama",
        file_type=ftype,
        quantisation=qname,
        tensor_count=3 + 9 * n_layers,
        tensor_bytes=expected_tensor_bytes(quant=quant, **shape),
        has_tokenizer=True,
        has_chat_template=True,
        layers=expected_layers(quant=quant, **shape),
    )


def test_the_tiny_writer_is_deterministic(tmp_path: Path) -> None:
    def digest(name: str, seed: int) -> str:
        path = write_tiny_llama(tmp_path / name, quant="q8_0", seed=seed)
        return hashlib.sha256(path.read_bytes()).hexdigest()

    assert digest("a.gguf", 7) == digest("b.gguf", 7)
    assert digest("c.gguf", 7) != digest("d.gguf", 8)


def summary_of(inspector: ModelInspector, tmp_path: Path, **kwargs: object) -> ModelSummary:
    return inspector.inspect(write_tiny_llama(tmp_path / "m.gguf", **kwargs))  # type: ignore[arg-type]


def test_missing_optional_keys_take_their_defaults(
    inspector: ModelInspector, tmp_path: Path
) -> None:
    summary = summary_of(
        inspector,
        tmp_path,
        n_head=4,
        n_head_kv=2,
        omit_keys={
            "llama.attention.head_count_kv",
            "llama.feed_forward_length",
            "general.file_type",
            "general.name",
        },
    )
    assert summary.architecture.n_head_kv == 4  # absent: as many KV heads as heads
    assert summary.architecture.key_length == summary.architecture.value_length == 16
    assert summary.architecture.n_ff == 0
    assert summary.file_type is None
    assert summary.name is None


def test_declared_key_and_value_lengths_win(inspector: ModelInspector, tmp_path: Path) -> None:
    overrides = {"llama.attention.key_length": (32, U32), "llama.attention.value_length": (8, U32)}
    summary = summary_of(inspector, tmp_path, override_keys=overrides)
    assert (summary.architecture.key_length, summary.architecture.value_length) == (32, 8)


def test_per_layer_arrays_take_the_largest_layer(inspector: ModelInspector, tmp_path: Path) -> None:
    overrides = {
        "llama.feed_forward_length": ([64, 128], GGUFValueType.ARRAY),
        "llama.attention.head_count_kv": ([1, 2], GGUFValueType.ARRAY),
    }
    summary = summary_of(inspector, tmp_path, override_keys=overrides)
    assert (summary.architecture.n_ff, summary.architecture.n_head_kv) == (128, 2)


def test_without_a_tokenizer_the_vocabulary_comes_from_the_embedding(
    inspector: ModelInspector, tmp_path: Path
) -> None:
    summary = summary_of(inspector, tmp_path, tokenizer=False, chat_template=False)
    assert summary.architecture.n_vocab == 355
    assert (summary.has_tokenizer, summary.has_chat_template) == (False, False)


def test_a_declared_vocab_size_is_used_without_a_tokenizer(
    inspector: ModelInspector, tmp_path: Path
) -> None:
    overrides = {"llama.vocab_size": (400, U32)}
    summary = summary_of(inspector, tmp_path, tokenizer=False, override_keys=overrides)
    assert summary.architecture.n_vocab == 400
    assert (summary.has_tokenizer, summary.has_chat_template) == (False, True)


def test_without_a_chat_template(inspector: ModelInspector, tmp_path: Path) -> None:
    summary = summary_of(inspector, tmp_path, chat_template=False)
    assert (summary.has_tokenizer, summary.has_chat_template) == (True, False)


# --- malformed files ---------------------------------------------------------------------


@pytest.fixture
def valid(tmp_path: Path) -> Path:
    return write_tiny_llama(tmp_path / "model.gguf", quant="q8_0")


def test_bad_magic(inspector: ModelInspector, valid: Path) -> None:
    assert "not a GGUF file (bad magic b'GGML')" in refusal(
        inspector, patched(valid, 0, "4s", b"GGML")
    )


def test_an_unsupported_version(inspector: ModelInspector, valid: Path) -> None:
    assert "GGUF version 1 is not supported" in refusal(inspector, patched(valid, 4, "<I", 1))


@pytest.mark.parametrize("where", ["magic", "header", "metadata", "tensor info", "tensor data"])
def test_a_truncated_file(inspector: ModelInspector, valid: Path, where: str) -> None:
    layout = part_offsets(valid)
    last = GGUFReader(valid).tensors[-1]
    cut = {
        "magic": 2,
        "header": 20,
        "metadata": layout["tokenizer.ggml.tokens"][0] + 100,
        "tensor info": layout["output.weight"][0] + 3,
        "tensor data": last.data_offset + last.n_bytes - 1,
    }[where]
    valid.write_bytes(valid.read_bytes()[:cut])
    message = refusal(inspector, valid)
    if where == "magic":
        assert "bad magic" in message
    else:
        assert "truncated" in message
        assert str(cut) in message  # where the file ends


def test_an_absurd_tensor_count(inspector: ModelInspector, valid: Path) -> None:
    message = refusal(inspector, patched(valid, 8, "<Q", HUGE))
    assert f"declares {HUGE} tensors" in message


def test_an_absurd_metadata_count(inspector: ModelInspector, valid: Path) -> None:
    message = refusal(inspector, patched(valid, 16, "<Q", HUGE))
    assert f"{HUGE} metadata entries" in message


def test_a_tensor_count_of_zero(inspector: ModelInspector, valid: Path) -> None:
    assert "holds no tensors" in refusal(inspector, patched(valid, 8, "<Q", 0))


@pytest.mark.parametrize(
    ("entry", "part"),
    [
        ("general.architecture", 0),  # the key's length
        ("general.name", 3),  # a string value's length
        ("tokenizer.ggml.tokens", 4),  # an array's length (strings)
        ("tokenizer.ggml.token_type", 4),  # an array's length (integers)
        ("tokenizer.ggml.tokens", 5),  # the length of a string inside an array
        ("token_embd.weight", 0),  # a tensor name's length
        ("token_embd.weight", 2),  # a tensor's dimension count
        ("token_embd.weight", 3),  # a tensor's first dimension
        ("token_embd.weight", 5),  # a tensor's data offset
    ],
)
def test_an_absurd_length_or_count(
    inspector: ModelInspector, valid: Path, entry: str, part: int
) -> None:
    offset = part_offsets(valid)[entry][part]
    fmt = "<I" if (entry, part) == ("token_embd.weight", 2) else "<Q"
    value = 2**31 if fmt == "<I" else HUGE
    assert "corrupt" in refusal(inspector, patched(valid, offset, fmt, value))


def test_an_unknown_value_type(inspector: ModelInspector, valid: Path) -> None:
    offset = part_offsets(valid)["general.name"][2]
    assert "corrupt: unknown metadata value type 1234" in refusal(
        inspector, patched(valid, offset, "<I", 1234)
    )


def test_an_unknown_tensor_type(inspector: ModelInspector, valid: Path) -> None:
    offset = part_offsets(valid)["token_embd.weight"][4]
    assert "corrupt: unknown tensor type 99" in refusal(inspector, patched(valid, offset, "<I", 99))


def test_the_number_of_reads_is_bounded(
    inspector: ModelInspector, valid: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gguf_inspector, "MAX_READS", 100)
    assert "corrupt: more than 100 metadata values" in refusal(inspector, valid)


def test_the_size_of_one_value_is_bounded(
    inspector: ModelInspector, valid: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gguf_inspector, "MAX_VALUE_BYTES", 100)  # the chat template is longer
    offset = part_offsets(valid)["tokenizer.chat_template"][4]
    assert f"corrupt: a metadata value at byte {offset} declares" in refusal(inspector, valid)


def test_a_key_that_is_not_utf8(inspector: ModelInspector, valid: Path) -> None:
    offset = part_offsets(valid)["general.name"][1]
    assert "not valid UTF-8" in refusal(inspector, patched(valid, offset, "B", 0xFF))


@pytest.mark.parametrize("key", REQUIRED)
def test_a_missing_required_key(inspector: ModelInspector, tmp_path: Path, key: str) -> None:
    path = write_tiny_llama(tmp_path / "m.gguf", omit_keys={key})
    assert f"missing key {key}" in refusal(inspector, path)


WRONG_TYPES = [
    ("general.architecture", (7, U32), "has type uint32, expected a string"),
    ("llama.block_count", ("two", STR), "has type string, expected an integer"),
    (
        "llama.embedding_length",
        (64.0, GGUFValueType.FLOAT32),
        "has type float32, expected an integer",
    ),
    (
        "llama.attention.head_count",
        (True, GGUFValueType.BOOL),
        "has type bool, expected an integer",
    ),
    ("llama.attention.head_count_kv", ("4", STR), "has type string, expected an integer"),
    ("llama.attention.key_length", ("16", STR), "has type string, expected an integer"),
    ("llama.attention.value_length", (["16"], GGUFValueType.ARRAY), "has type array/string"),
    ("llama.feed_forward_length", ("128", STR), "has type string, expected an integer"),
    ("llama.context_length", ("256", STR), "has type string, expected an integer"),
    (
        "llama.block_count",
        ([2, 2], GGUFValueType.ARRAY),
        "has type array/int32, expected an integer",
    ),
    ("general.file_type", ("q8", STR), "has type string, expected an integer"),
    ("general.name", (1, U32), "has type uint32, expected a string"),
    ("tokenizer.ggml.tokens", ("abc", STR), "has type string, expected an array of strings"),
    ("tokenizer.chat_template", (1, U32), "has type uint32, expected a string"),
]


@pytest.mark.parametrize(("key", "value", "problem"), WRONG_TYPES)
def test_a_value_of_the_wrong_type(
    inspector: ModelInspector,
    tmp_path: Path,
    key: str,
    value: tuple[object, GGUFValueType],
    problem: str,
) -> None:
    path = write_tiny_llama(tmp_path / "m.gguf", override_keys={key: value})
    assert f"key {key} {problem}" in refusal(inspector, path)


ABSURD_VALUES = [
    ("llama.block_count", 0, "is 0, expected 1 to 10000"),
    ("llama.block_count", 20_000, "is 20000, expected 1 to 10000"),
    ("llama.embedding_length", 0, "is 0, expected 1 to"),
    ("llama.attention.head_count", 128, "is 128, expected 1 to 64"),
    ("llama.attention.head_count_kv", 8, "is 8, expected 1 to 4"),
    ("llama.attention.key_length", 0, "is 0, expected 1 to 65536"),
    ("llama.context_length", 2**40, f"is {2**40}, expected 1 to"),
    ("llama.feed_forward_length", -1, "is negative (-1)"),
    ("llama.vocab_size", 0, "is 0, expected 1 to"),
]


@pytest.mark.parametrize(("key", "value", "problem"), ABSURD_VALUES)
def test_an_absurd_value(
    inspector: ModelInspector, tmp_path: Path, key: str, value: int, problem: str
) -> None:
    vtype = GGUFValueType.INT64 if value < 0 or value >= 2**32 else U32
    path = write_tiny_llama(
        tmp_path / "m.gguf",
        tokenizer=key != "llama.vocab_size",
        override_keys={key: (value, vtype)},
    )
    assert f"key {key} {problem}" in refusal(inspector, path)


def test_an_architecture_name_that_is_not_a_name(inspector: ModelInspector, tmp_path: Path) -> None:
    path = write_tiny_llama(
        tmp_path / "m.gguf", override_keys={"general.architecture": ("lla ma", STR)}
    )
    assert "not an architecture name" in refusal(inspector, path)


def test_a_directory(inspector: ModelInspector, tmp_path: Path) -> None:
    assert "is a directory" in refusal(inspector, tmp_path)


def test_an_empty_file(inspector: ModelInspector, tmp_path: Path) -> None:
    path = tmp_path / "empty.gguf"
    path.touch()
    assert "is empty" in refusal(inspector, path)


def test_a_text_file(inspector: ModelInspector, tmp_path: Path) -> None:
    path = tmp_path / "notes.gguf"
    path.write_text("these are not\nthe weights you are looking for\n")
    assert "not a GGUF file (bad magic b'thes')" in refusal(inspector, path)


def test_a_file_that_does_not_exist(inspector: ModelInspector, tmp_path: Path) -> None:
    assert "no such file" in refusal(inspector, tmp_path / "absent.gguf")


def test_a_big_endian_file_is_read(inspector: ModelInspector, tmp_path: Path) -> None:
    path = tmp_path / "big-endian.gguf"
    writer = GGUFWriter(path, "llama", endianess=GGUFEndian.BIG)
    for key, value in [
        ("llama.block_count", 2),
        ("llama.embedding_length", 64),
        ("llama.attention.head_count", 4),
        ("llama.context_length", 256),
        ("llama.vocab_size", 10),
    ]:
        writer.add_uint32(key, value)
    writer.add_tensor("token_embd.weight", np.ones((10, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    summary = inspector.inspect(path)
    assert (summary.architecture.n_layers, summary.architecture.n_vocab) == (2, 10)
    assert (summary.tensor_count, summary.tensor_bytes, summary.quantisation) == (1, 2560, "F32")


# -- what memory prediction needs beyond the basic shape ----------------------------------------


def test_experts_are_read(tmp_path: Path, inspector: ModelInspector) -> None:
    path = write_tiny_llama(tmp_path / "moe.gguf", n_expert=8, n_expert_used=2)
    arch = inspector.inspect(path).architecture
    assert (arch.n_expert, arch.n_expert_used) == (8, 2)
    assert (arch.sliding_window, arch.swa_layers, arch.kv_cache, arch.lm_head) == (0, 0, True, True)


@pytest.mark.parametrize(
    ("pattern", "swa_layers"),
    [
        (None, 0),  # llama has no default pattern: every layer counts as full (never under)
        ((4, GGUFValueType.UINT32), 3),  # period 4: three window layers, then a full one
        ((0, GGUFValueType.UINT32), 4),  # period 0: every layer keeps a window
        (([True, False, True, False], GGUFValueType.ARRAY), 2),  # one flag per layer
    ],
)
def test_sliding_window_layers_follow_the_pattern(
    tmp_path: Path,
    inspector: ModelInspector,
    pattern: tuple[object, GGUFValueType] | None,
    swa_layers: int,
) -> None:
    keys = {"llama.attention.sliding_window": (512, GGUFValueType.UINT32)}
    if pattern is not None:
        keys["llama.attention.sliding_window_pattern"] = pattern
    path = write_tiny_llama(tmp_path / "swa.gguf", n_layers=4, override_keys=keys)
    arch = inspector.inspect(path).architecture
    assert arch.swa_layers == swa_layers
    assert arch.sliding_window == (512 if swa_layers else 0)
