"""Model architectures the tests predict memory for.

``TINY`` is the tiny llama model of ../shared/NOTES-llamacpp.md, the one the memory
tests work out by hand; the controller's and the agent's tests reuse it wherever a
model's architecture is asked for.
"""

from __future__ import annotations

from nodeau.domain.memory import Architecture

# The tiny llama model of ../shared/NOTES-llamacpp.md: 2 layers, n_embd 64, 4 heads,
# ff 128, head size 16, a 355-token byte-level vocabulary.
TINY = Architecture(
    name="llama",
    n_layers=2,
    n_embd=64,
    n_head=4,
    n_head_kv=4,
    key_length=16,
    value_length=16,
    n_vocab=355,
    n_ff=128,
    context_length=256,
)
