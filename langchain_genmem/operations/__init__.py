"""The operations every front end offers, each declared once: remember, recall, forget.

Each is a pydantic model that owns its fields, bounds, defaults, help text and rules (the
fourth operation, reflect, is :class:`~langchain_genmem.reflection.ReflectionSettings`):

- remember: :class:`MemoryItem` (one memory), :class:`MemoryRequest` (for a persona),
  :class:`MemoryBatchRequest` (several, all or nothing);
- recall: :class:`RetrieveRequest` (weighted retrieval, presets, filters) and
  :class:`KeywordRequest` (the original's keyword retrieval);
- forget: :class:`ForgetRequest` (ids and selectors, dry run, keep derived).

The HTTP service takes them as its bodies; the MCP tools' arguments are derived from them
(:func:`~langchain_genmem.operations.derive.tool_parameters`); the command line takes its
bounds and defaults from them. :data:`LIMITS` lists every bound, as ``GET /healthz`` shows it.
"""

from langchain_genmem.operations.fields import LIMITS
from langchain_genmem.operations.forget import ForgetRequest
from langchain_genmem.operations.recall import KeywordRequest, RetrieveRequest
from langchain_genmem.operations.remember import MemoryBatchRequest, MemoryItem, MemoryRequest

__all__ = [
    "LIMITS",
    "ForgetRequest",
    "KeywordRequest",
    "MemoryBatchRequest",
    "MemoryItem",
    "MemoryRequest",
    "RetrieveRequest",
]
