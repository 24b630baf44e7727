"""all-MiniLM-L6-v2 as a ``bert`` GGUF, converted without torch.

llama.cpp's convert_hf_to_gguf.py needs torch; this does what a BERT embedding model needs with
numpy, ``safetensors`` and ggml-org's ``gguf`` writer. Deterministic: same source, same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from safetensors.numpy import load_file

_SKIPPED = ("embeddings.position_ids", "pooler.")
_POOLING_MEAN = 1


def _vocab(tokenizer: dict[str, Any]) -> tuple[list[str], list[int]]:
    by_id = sorted(tokenizer["model"]["vocab"].items(), key=lambda item: item[1])
    special = {t["id"] for t in tokenizer["added_tokens"] if t["special"]}
    tokens, types = [], []
    for token, token_id in by_id:
        if token_id in special:
            tokens.append(token)
            types.append(int(gguf.TokenType.CONTROL))
        else:
            # llama.cpp's "phantom space" form: a word start gets U+2581, a ``##``
            # continuation loses its prefix
            tokens.append(token[2:] if token.startswith("##") else "\u2581" + token)
            types.append(int(gguf.TokenType.NORMAL))
    return tokens, types


def write_minilm_gguf(model_dir: Path, out: Path) -> Path:
    """Convert the sentence-transformers folder ``model_dir`` (config.json, tokenizer.json,
    model.safetensors) into a f16 ``bert`` GGUF at ``out``."""
    config = json.loads((model_dir / "config.json").read_text())
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    n_layers = config["num_hidden_layers"]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    writer = gguf.GGUFWriter(out, "bert")
    writer.add_name("all-MiniLM-L6-v2")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(n_layers)
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType(_POOLING_MEAN))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_token_type_count(config["type_vocab_size"])
    tokens, types = _vocab(tokenizer)
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    vocab = tokenizer["model"]["vocab"]
    writer.add_unk_token_id(vocab["[UNK]"])
    writer.add_sep_token_id(vocab["[SEP]"])
    writer.add_pad_token_id(vocab["[PAD]"])
    writer.add_bos_token_id(vocab["[CLS]"])  # llama.cpp starts a BERT input with [CLS]
    writer.add_mask_token_id(vocab["[MASK]"])
    for name, data in load_file(model_dir / "model.safetensors").items():
        if name.startswith(_SKIPPED):
            continue
        mapped = names.get_name(name.removeprefix("bert."), try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ValueError(f"no GGUF name for tensor {name}")
        array = data.astype(np.float32)
        # 2-D weights in f16, as convert_hf_to_gguf.py's ``--outtype f16``
        if array.ndim == 2 and not mapped.startswith("token_types"):
            array = array.astype(np.float16)
        writer.add_tensor(mapped, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
