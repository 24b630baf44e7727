"""The embedded model runtime: llama-cpp-python's server (``python -m llama_cpp.server``).

Why it is so: docs/adr/decisions/adapters.md (llama_cpp_python.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from gguf import GGMLQuantizationType

from nodeau.adapters.llama_server import ALL_LAYERS, LIB_ENV, server_environment
from nodeau.adapters.model_server_process import HOST, ServerProcessRuntime
from nodeau.domain.memory import CacheType
from nodeau.domain.tasks import Task
from nodeau.ports.runtime import RuntimeFailure, ServerSpec

MODULE = "llama_cpp.server"
NO_RERANK = "llama-cpp-python's server has no /v1/rerank: set NODEAU_LLAMA_SERVER to a llama-server"
NO_SPLIT = (
    "llama-cpp-python's server is not given a model split across cards: set "
    "NODEAU_LLAMA_SERVER to a llama-server"
)

# llama-cpp-python 0.3.36's server settings: each is also read from the environment variable
# of that name, in any case (pydantic-settings). tests/integration pins the list to ``--help``.
SETTINGS = frozenset((
    "model", "model_alias", "n_gpu_layers", "split_mode", "main_gpu", "tensor_split",
    "vocab_only", "use_mmap", "use_mlock", "kv_overrides", "rpc_servers", "seed", "n_ctx",
    "n_batch", "n_ubatch", "n_threads", "n_threads_batch", "rope_scaling_type", "rope_freq_base",
    "rope_freq_scale", "yarn_ext_factor", "yarn_attn_factor", "yarn_beta_fast", "yarn_beta_slow",
    "yarn_orig_ctx", "mul_mat_q", "logits_all", "embedding", "offload_kqv", "flash_attn",
    "last_n_tokens_size", "lora_base", "lora_path", "numa", "chat_format", "chat_template_kwargs",
    "clip_model_path", "cache", "cache_type", "cache_size", "hf_tokenizer_config_path",
    "hf_pretrained_model_name_or_path", "hf_model_repo_id", "draft_model",
    "draft_model_num_pred_tokens", "type_k", "type_v", "verbose", "host", "port", "ssl_keyfile",
    "ssl_certfile", "api_key", "interrupt_requests", "disable_ping_events", "root_path",
    "config_file"
))  # fmt: skip


def ggml_type(cache_type: CacheType) -> int:
    """The ggml type number llama-cpp-python's ``--type_k``/``--type_v`` take."""
    return int(GGMLQuantizationType[cache_type.name])


def server_command(python: Path, spec: ServerSpec, port: int) -> tuple[str, ...]:
    """The exact command line that serves ``spec`` on ``port`` with llama-cpp-python."""
    c = spec.config
    return (
        str(python), "-I", "-m", MODULE,
        "--model", str(spec.model_path),
        "--model_alias", spec.name,
        "--host", HOST,
        "--port", str(port),
        "--n_ctx", str(c.context_tokens),
        "--n_batch", str(c.batch),
        "--n_ubatch", str(c.ubatch),
        "--type_k", str(ggml_type(c.cache_type_k)),
        "--type_v", str(ggml_type(c.cache_type_v)),
        "--flash_attn", _flag(c.flash_attention),
        "--n_gpu_layers", ALL_LAYERS if spec.gpu_uuid is not None else "0",
        "--embedding", _flag(c.task is Task.EMBED),  # pooling: the model's own
        "--logits_all", "false",
        "--use_mlock", "false",
        "--interrupt_requests", "false",
        "--verbose", "true",  # llama.cpp's load report (context, buffers) goes to the log
    )  # fmt: skip


def _flag(on: bool) -> str:
    return "true" if on else "false"


def child_environment(
    base: Mapping[str, str], gpu_uuid: str | None, library: Path | None
) -> dict[str, str]:
    """llama-server's environment rules, without variables naming a server setting, and with
    ``LLAMA_CPP_LIB_PATH`` set to ``library`` unless ``base`` sets it."""
    env = {k: v for k, v in server_environment(base, gpu_uuid).items() if k.lower() not in SETTINGS}
    if library is not None and not env.get(LIB_ENV):
        env[LIB_ENV] = str(library)
    return env


class LlamaCppPythonRuntime(ServerProcessRuntime):
    """ModelRuntime on llama-cpp-python's server, run by ``python``."""

    server_name = "llama-cpp-python's server"
    ready_path = "/v1/models"  # it listens only once the model is loaded
    bind_failure = "address already in use"
    key_variable = "API_KEY"

    def __init__(
        self,
        python: Path,
        *,
        library: Path | None = None,
        inventory_memory: Callable[[int], int | None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """``python``: a Python with ``llama_cpp[server]``; ``library``: the folder with
        libllama (None: the package's own, or ``LLAMA_CPP_LIB_PATH``); the rest as
        ``ServerProcessRuntime``."""
        super().__init__(inventory_memory=inventory_memory, environ=environ)
        self._python = python
        self._library = library

    def check(self, spec: ServerSpec) -> None:
        if spec.config.task is Task.RERANK:
            raise RuntimeFailure(NO_RERANK)
        if spec.split:
            raise RuntimeFailure(NO_SPLIT)

    def command(self, spec: ServerSpec, port: int) -> tuple[str, ...]:
        return server_command(self._python, spec, port)

    def environment(self, base: Mapping[str, str], spec: ServerSpec) -> dict[str, str]:
        return child_environment(base, spec.visible_cards, self._library)
