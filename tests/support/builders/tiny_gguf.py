"""Tiny llama-architecture GGUF files for tests, written with ggml-org's ``gguf`` writer.

They follow /work/shared/NOTES-llamacpp.md "Tiny models for tests", so real llama.cpp loads them
(in about 0.02 s). Random weights, deterministic bytes: the same arguments, the same SHA-256.
Unusual files come from ``omit_keys`` and ``override_keys``, never from editing bytes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal

import gguf
import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, Keys, LlamaFileType, TokenType

# NOTES-llamacpp.md's layout: a SentencePiece-style byte vocabulary that round-trips any text,
# llama tensor names in numpy shape (out, in), f32 norms of ones, rope dimension = head size,
# RMS epsilon 1e-5 and a ChatML chat template.
ARCH = "llama"
VOCAB_SIZE = 355
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
RMS_EPS = 1e-5

Quant = Literal["f32", "f16", "q8_0"]
KeyValue = tuple[Any, GGUFValueType]

_QUANT_TYPES: dict[str, tuple[GGMLQuantizationType, LlamaFileType]] = {
    "f32": (GGMLQuantizationType.F32, LlamaFileType.ALL_F32),
    "f16": (GGMLQuantizationType.F16, LlamaFileType.MOSTLY_F16),
    "q8_0": (GGMLQuantizationType.Q8_0, LlamaFileType.MOSTLY_Q8_0),
}
_WORD_BOUNDARY = "\u2581"


def tiny_vocab(size: int = VOCAB_SIZE) -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and token types of the 355-token byte vocabulary.

    ``<unk>``, ``<s>``, ``</s>``, the 256 byte tokens ``<0x00>``..``<0xFF>``,
    the word-boundary piece U+2581 and the 95 printable ASCII characters; a
    larger ``size`` adds unused ``<extra_N>`` pieces (a large-vocabulary shape).
    """
    if size < VOCAB_SIZE:
        raise ValueError(f"a vocabulary of {size} tokens is smaller than the {VOCAB_SIZE} needed")
    tokens = ["<unk>", "<s>", "</s>"]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [TokenType.BYTE] * 256
    tokens += [_WORD_BOUNDARY] + [chr(c) for c in range(0x20, 0x7F)]
    types += [TokenType.NORMAL] * 96
    assert len(tokens) == VOCAB_SIZE
    tokens += [f"<extra_{i}>" for i in range(size - VOCAB_SIZE)]
    types += [TokenType.UNUSED] * (size - VOCAB_SIZE)
    scores = [0.0] * len(tokens)
    return tokens, scores, [int(t) for t in types]


def tiny_llama_tensors(
    *,
    n_layers: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    n_ff: int,
    seed: int,
    vocab_size: int = VOCAB_SIZE,
    n_expert: int = 0,
) -> dict[str, np.ndarray[Any, Any]]:
    """The llama tensors in f32, numpy shape (out, in), in the order llama.cpp expects;
    with ``n_expert`` the feed-forward is a mixture of experts (Mixtral's layout)."""
    rng = np.random.default_rng(seed)
    head_dim = n_embd // n_head

    def weight(rows: int, cols: int) -> np.ndarray[Any, Any]:
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)

    def ones(n: int) -> np.ndarray[Any, Any]:
        return np.ones(n, dtype=np.float32)

    def experts(rows: int, cols: int) -> np.ndarray[Any, Any]:
        return (rng.standard_normal((n_expert, rows, cols)) * 0.02).astype(np.float32)

    tensors = {"token_embd.weight": weight(vocab_size, n_embd)}
    for i in range(n_layers):
        blk = f"blk.{i}"
        tensors[f"{blk}.attn_norm.weight"] = ones(n_embd)
        tensors[f"{blk}.attn_q.weight"] = weight(n_head * head_dim, n_embd)
        tensors[f"{blk}.attn_k.weight"] = weight(n_head_kv * head_dim, n_embd)
        tensors[f"{blk}.attn_v.weight"] = weight(n_head_kv * head_dim, n_embd)
        tensors[f"{blk}.attn_output.weight"] = weight(n_embd, n_head * head_dim)
        tensors[f"{blk}.ffn_norm.weight"] = ones(n_embd)
        if n_expert:
            tensors[f"{blk}.ffn_gate_inp.weight"] = weight(n_expert, n_embd)
            tensors[f"{blk}.ffn_gate_exps.weight"] = experts(n_ff, n_embd)
            tensors[f"{blk}.ffn_up_exps.weight"] = experts(n_ff, n_embd)
            tensors[f"{blk}.ffn_down_exps.weight"] = experts(n_embd, n_ff)
        else:
            tensors[f"{blk}.ffn_gate.weight"] = weight(n_ff, n_embd)
            tensors[f"{blk}.ffn_up.weight"] = weight(n_ff, n_embd)
            tensors[f"{blk}.ffn_down.weight"] = weight(n_embd, n_ff)
    tensors["output_norm.weight"] = ones(n_embd)
    tensors["output.weight"] = weight(vocab_size, n_embd)
    return tensors


def _metadata(
    *,
    name: str,
    n_layers: int,
    n_embd: int,
    n_head: int,
    n_head_kv: int,
    n_ff: int,
    context: int,
    file_type: LlamaFileType,
    quantised: bool,
    tokenizer: bool,
    chat_template: bool,
    vocab_size: int = VOCAB_SIZE,
    n_expert: int = 0,
    n_expert_used: int = 0,
) -> dict[str, KeyValue]:
    u32, f32 = GGUFValueType.UINT32, GGUFValueType.FLOAT32
    kv: dict[str, KeyValue] = {
        Keys.General.NAME: (name, GGUFValueType.STRING),
        Keys.General.FILE_TYPE: (int(file_type), u32),
        Keys.LLM.CONTEXT_LENGTH.format(arch=ARCH): (context, u32),
        Keys.LLM.EMBEDDING_LENGTH.format(arch=ARCH): (n_embd, u32),
        Keys.LLM.BLOCK_COUNT.format(arch=ARCH): (n_layers, u32),
        Keys.LLM.FEED_FORWARD_LENGTH.format(arch=ARCH): (n_ff, u32),
        Keys.Attention.HEAD_COUNT.format(arch=ARCH): (n_head, u32),
        Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH): (n_head_kv, u32),
        Keys.Rope.DIMENSION_COUNT.format(arch=ARCH): (n_embd // n_head, u32),
        Keys.Attention.LAYERNORM_RMS_EPS.format(arch=ARCH): (RMS_EPS, f32),
    }
    if n_expert:
        kv[Keys.LLM.EXPERT_COUNT.format(arch=ARCH)] = (n_expert, u32)
        kv[Keys.LLM.EXPERT_USED_COUNT.format(arch=ARCH)] = (n_expert_used, u32)
    if quantised:
        kv[Keys.General.QUANTIZATION_VERSION] = (gguf.GGML_QUANT_VERSION, u32)
    if tokenizer:
        tokens, scores, types = tiny_vocab(vocab_size)
        kv |= {
            Keys.Tokenizer.MODEL: ("llama", GGUFValueType.STRING),
            Keys.Tokenizer.LIST: (tokens, GGUFValueType.ARRAY),
            Keys.Tokenizer.SCORES: (scores, GGUFValueType.ARRAY),
            Keys.Tokenizer.TOKEN_TYPE: (types, GGUFValueType.ARRAY),
            Keys.Tokenizer.UNK_ID: (0, u32),
            Keys.Tokenizer.BOS_ID: (1, u32),
            Keys.Tokenizer.EOS_ID: (2, u32),
        }
    if chat_template:
        kv[Keys.Tokenizer.CHAT_TEMPLATE] = (CHATML_TEMPLATE, GGUFValueType.STRING)
    return kv


def write_tiny_llama(
    path: Path | str,
    *,
    n_layers: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 4,
    n_ff: int = 128,
    context: int = 256,
    quant: Quant = "f32",
    seed: int = 0,
    vocab_size: int = VOCAB_SIZE,
    n_expert: int = 0,
    n_expert_used: int = 0,
    chat_template: bool = True,
    tokenizer: bool = True,
    name: str = "tiny-llama",
    omit_keys: Collection[str] = (),
    override_keys: Mapping[str, KeyValue] | None = None,
    tied: bool = False,
) -> Path:
    """Write a tiny llama GGUF at ``path`` and return the path.

    ``quant`` chooses the type of the 2-D weights ("q8_0" needs ``n_embd`` and
    ``n_ff`` to be multiples of 32); norms stay f32. ``tokenizer=False``
    leaves out every ``tokenizer.ggml.*`` key (the vocabulary size is then
    only in ``token_embd``), ``chat_template=False`` leaves out the template.
    ``omit_keys`` and ``override_keys`` (full key names, e.g.
    "llama.block_count") change the metadata for tests of missing or
    malformed values; ``general.architecture`` may be among them.
    ``vocab_size`` pads the vocabulary with unused pieces; ``n_expert`` (with
    ``n_expert_used`` of them routed per token) makes the feed-forward a
    mixture of experts. ``tied=True`` leaves out ``output.weight``: the output layer is the
    token embeddings, as in files that tie them.
    """
    if n_embd % n_head:
        raise ValueError(f"n_embd {n_embd} is not a multiple of n_head {n_head}")
    qtype, file_type = _QUANT_TYPES[quant]
    out = Path(path)
    writer = gguf.GGUFWriter(out, ARCH)
    kv = _metadata(
        name=name,
        n_layers=n_layers,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        context=context,
        file_type=file_type,
        quantised=qtype not in (GGMLQuantizationType.F32, GGMLQuantizationType.F16),
        tokenizer=tokenizer,
        chat_template=chat_template,
        vocab_size=vocab_size,
        n_expert=n_expert,
        n_expert_used=n_expert_used,
    )
    # The writer adds general.architecture itself; treat it like any other key.
    kv = {Keys.General.ARCHITECTURE: (ARCH, GGUFValueType.STRING)} | kv
    writer.kv_data[0].clear()
    kv |= dict(override_keys or {})
    for key, (value, vtype) in kv.items():
        if key not in omit_keys:
            writer.add_key_value(key, value, vtype)

    tensors = tiny_llama_tensors(
        n_layers=n_layers,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_ff=n_ff,
        seed=seed,
        vocab_size=vocab_size,
        n_expert=n_expert,
    )
    if tied:
        del tensors["output.weight"]
    return _finish(writer, tensors, qtype, out)


def _finish(
    writer: gguf.GGUFWriter,
    tensors: Mapping[str, np.ndarray[Any, Any]],
    qtype: GGMLQuantizationType,
    out: Path,
) -> Path:
    """Add the tensors in ``qtype`` (norms and the expert router stay f32) and write the file."""
    for tensor_name, data in tensors.items():
        if data.ndim == 1 or qtype == GGMLQuantizationType.F32 or "ffn_gate_inp" in tensor_name:
            writer.add_tensor(tensor_name, data)
        elif qtype == GGMLQuantizationType.F16:
            writer.add_tensor(tensor_name, data.astype(np.float16))
        else:
            writer.add_tensor(tensor_name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def tiny_llama_bytes(**kwargs: Any) -> bytes:
    """The bytes ``write_tiny_llama`` would write with these arguments (via a temporary file)."""
    with tempfile.TemporaryDirectory() as tmp:
        return write_tiny_llama(Path(tmp) / "tiny.gguf", **kwargs).read_bytes()


def part_offsets(path: Path | str) -> dict[str, tuple[int, ...]]:
    """Where each part of each metadata entry and tensor info starts, by key or tensor name.

    A metadata entry's parts are: key length, key, value type, then the
    value's own parts (a string: length, bytes; an array: item type, length,
    then each item's parts). A tensor info's parts are: name length, name,
    dimension count, dimensions, type, data offset. The header's counts are
    "GGUF.version" (4), "GGUF.tensor_count" (8) and "GGUF.kv_count" (16).
    For tests that corrupt one chosen number in a valid file.
    """
    reader = gguf.GGUFReader(path)
    fields = [*reader.fields.values(), *(t.field for t in reader.tensors)]
    offsets: dict[str, tuple[int, ...]] = {}
    for field in fields:
        starts, at = [], field.offset
        for part in field.parts:
            starts.append(at)
            at += int(part.nbytes)
        offsets[field.name] = tuple(starts)
    return offsets


def write_tiny_gemma3(
    path: Path | str,
    *,
    n_layers: int = 6,
    n_embd: int = 256,
    n_head: int = 4,
    n_head_kv: int = 1,
    head_dim: int = 64,
    n_ff: int = 1024,
    sliding_window: int = 512,
    context: int = 32768,
    quant: Quant = "f16",
    seed: int = 0,
) -> Path:
    """Write a tiny Gemma 3 GGUF (``gemma3``: sliding-window attention on 5 of every 6
    layers, the last of each 6 global; q/k norms, post-norms, output tied to the token
    embeddings) with the tiny byte vocabulary, and return the path."""
    qtype, file_type = _QUANT_TYPES[quant]
    rng = np.random.default_rng(seed)

    def weight(rows: int, cols: int) -> np.ndarray[Any, Any]:
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)

    def ones(n: int) -> np.ndarray[Any, Any]:
        return np.ones(n, dtype=np.float32)

    arch = "gemma3"
    u32, f32 = GGUFValueType.UINT32, GGUFValueType.FLOAT32
    out = Path(path)
    writer = gguf.GGUFWriter(out, arch)
    tokens, scores, types = tiny_vocab()
    for key, (value, vtype) in {
        Keys.General.NAME: ("tiny-gemma3", GGUFValueType.STRING),
        Keys.General.FILE_TYPE: (int(file_type), u32),
        Keys.LLM.CONTEXT_LENGTH.format(arch=arch): (context, u32),
        Keys.LLM.EMBEDDING_LENGTH.format(arch=arch): (n_embd, u32),
        Keys.LLM.BLOCK_COUNT.format(arch=arch): (n_layers, u32),
        Keys.LLM.FEED_FORWARD_LENGTH.format(arch=arch): (n_ff, u32),
        Keys.Attention.HEAD_COUNT.format(arch=arch): (n_head, u32),
        Keys.Attention.HEAD_COUNT_KV.format(arch=arch): (n_head_kv, u32),
        Keys.Attention.KEY_LENGTH.format(arch=arch): (head_dim, u32),
        Keys.Attention.VALUE_LENGTH.format(arch=arch): (head_dim, u32),
        Keys.Attention.LAYERNORM_RMS_EPS.format(arch=arch): (1e-6, f32),
        Keys.Attention.SLIDING_WINDOW.format(arch=arch): (sliding_window, u32),
        Keys.Tokenizer.MODEL: ("llama", GGUFValueType.STRING),
        Keys.Tokenizer.LIST: (tokens, GGUFValueType.ARRAY),
        Keys.Tokenizer.SCORES: (scores, GGUFValueType.ARRAY),
        Keys.Tokenizer.TOKEN_TYPE: (types, GGUFValueType.ARRAY),
        Keys.Tokenizer.UNK_ID: (0, u32),
        Keys.Tokenizer.BOS_ID: (1, u32),
        Keys.Tokenizer.EOS_ID: (2, u32),
        Keys.Tokenizer.CHAT_TEMPLATE: (CHATML_TEMPLATE, GGUFValueType.STRING),
    }.items():
        writer.add_key_value(key, value, vtype)
    tensors = {"token_embd.weight": weight(VOCAB_SIZE, n_embd)}
    for i in range(n_layers):
        blk = f"blk.{i}"
        tensors |= {
            f"{blk}.attn_norm.weight": ones(n_embd),
            f"{blk}.attn_q.weight": weight(n_head * head_dim, n_embd),
            f"{blk}.attn_k.weight": weight(n_head_kv * head_dim, n_embd),
            f"{blk}.attn_v.weight": weight(n_head_kv * head_dim, n_embd),
            f"{blk}.attn_output.weight": weight(n_embd, n_head * head_dim),
            f"{blk}.post_attention_norm.weight": ones(n_embd),
            f"{blk}.attn_q_norm.weight": ones(head_dim),
            f"{blk}.attn_k_norm.weight": ones(head_dim),
            f"{blk}.ffn_norm.weight": ones(n_embd),
            f"{blk}.ffn_gate.weight": weight(n_ff, n_embd),
            f"{blk}.ffn_up.weight": weight(n_ff, n_embd),
            f"{blk}.ffn_down.weight": weight(n_embd, n_ff),
            f"{blk}.post_ffw_norm.weight": ones(n_embd),
        }
    tensors["output_norm.weight"] = ones(n_embd)
    return _finish(writer, tensors, qtype, out)
