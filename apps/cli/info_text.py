"""The text of ``nodeau model info``: every figure says whether it is estimated or measured,
the same words on both planes."""

from __future__ import annotations

from nodeau.apps.cli.render import size
from nodeau.apps.qualification.commands import ModelInfoView


def info_lines(info: ModelInfoView) -> list[str]:
    lines = [
        f"model        {', '.join(info.names) or '-'}",
        f"artifact     {info.artifact_id}",
        f"size         {size(info.size_bytes)} ({info.size_bytes} bytes)",
    ]
    if info.note is not None:
        lines.append(f"note         {info.note}")
    s = info.summary
    if s is None:
        lines.append("architecture not read (no verified copy); no peak VRAM estimated")
    else:
        a = s.architecture
        lines += [
            f"architecture {a.name}: {a.n_layers} layers, embedding {a.n_embd}, {a.n_head} heads, "
            f"{a.n_head_kv} KV heads, key/value {a.key_length}/{a.value_length}, "
            f"vocabulary {a.n_vocab}, feed-forward {a.n_ff}, context {a.context_length}",
            f"quantisation {s.quantisation} (file type {s.file_type or 'not declared'}), "
            f"{s.tensor_count} tensors, {size(s.tensor_bytes)}",
            f"tokenizer    {'yes' if s.has_tokenizer else 'no'}; "
            f"chat template {'yes' if s.has_chat_template else 'no'}",
            "predicted peak VRAM (chat, 1 slot, f16 KV cache):",
        ]
        for e in info.estimates:
            lines.append(
                f"  context {e.context_tokens:>7}: {size(e.prediction.total_bytes)} "
                f"({e.prediction.source.value})"
            )
    if info.measured:
        lines.append("measured configurations (peak on a card, what admission uses there):")
        lines.extend(
            f"  {m.gpu_model}: {m.config_key}: {size(m.peak_bytes)} ({m.source})"
            for m in info.measured
        )
    elif info.summary is not None:
        lines.append("measured configurations: none (every figure above is an estimate)")
    else:
        lines.append("measured configurations: none")
    if info.capabilities:
        lines.append(
            f"capabilities (qualified {info.qualified}):" if info.qualified else "capabilities:"
        )
        lines.extend(
            f"  {c.capability.value:<18} {c.state}" + (f": {c.evidence}" if c.evidence else "")
            for c in info.capabilities
        )
    return lines
