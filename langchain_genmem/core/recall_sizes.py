"""How many memories a recall returns unless told, declared once for every front end.

The library and the HTTP service return the original's count; a front end whose reader is
a model or a person at a terminal returns fewer, and the chat agent puts fewer still in its
prompt. Each front end takes its default from here.
"""

from __future__ import annotations

__all__ = ["CHAT_RECALL_K", "RECALL_K", "SHOWN_RECALL_K"]

RECALL_K = 30
"""Weighted and keyword retrieval in the library and over HTTP: the original's ``n_count``."""

SHOWN_RECALL_K = 10
"""Retrieval shown to a model (MCP ``recall`` and ``keywords``) or on a terminal (``genmem
search``, ``explain``, ``keywords``): thirty memories crowd a model's context and a screen."""

CHAT_RECALL_K = 5
"""The memories the chat agent puts in its prompt each turn (and ``genmem demo`` shows)."""
