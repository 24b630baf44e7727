"""Tasks: what a workload is started to do, and so which API routes answer.

A task (chat, embed, rerank) is coarser than a capability; qualification
reports capabilities one at a time, the task picks the routes.
"""

from __future__ import annotations

import enum


class Task(str, enum.Enum):
    CHAT = "chat"
    EMBED = "embed"
    RERANK = "rerank"


_ROUTES: dict[Task, tuple[str, ...]] = {
    Task.CHAT: ("/v1/chat/completions", "/v1/completions"),
    Task.EMBED: ("/v1/embeddings",),
    Task.RERANK: ("/v1/rerank",),
}


def routes_for(task: Task) -> tuple[str, ...]:
    """The OpenAI-compatible routes a workload of this task answers (besides /v1/models)."""
    return _ROUTES[task]


def produces_embeddings(task: Task) -> bool:
    """Embedding and rerank servers keep a vector per token of a batch, not one logit row."""
    return task is not Task.CHAT
