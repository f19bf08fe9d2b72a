"""What of an item is embedded: ``IndexConfig`` and per-item ``index`` paths, as in LangGraph.

A store built with ``index={"embed": ..., "dims": ..., "fields": [...]}`` embeds, for each
item, the text at each field path (``"$"``, the default, is the whole value as JSON;
``"metadata.title"``, ``"chapters[*].content"``, ``"authors[0].name"`` and ``"{a,b}"`` as
LangGraph's ``get_text_at_path`` reads them); ``put(..., index=[paths])`` replaces the fields
for one item and ``index=False`` embeds nothing. Each text found is one memory (a *facet* of
the item); a search scores an item by its best facet. A store built without an index keeps
its earlier reading: the ``text_field`` text (else the value's JSON) unless ``index=`` names
paths.

``embed`` is an ``Embeddings``, a function of a list of texts (sync or async) or a provider
string that LangChain resolves (``"openai:text-embedding-3-small"``, with ``langchain``
installed); without it the bundled model embeds. ``dims``, when given, is checked against
every vector the model returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, ensure_embeddings, get_text_at_path, tokenize_path

from langchain_genmem.core.errors import ValidationError

__all__ = ["FACETS_MAX", "ItemIndex", "as_json"]

FACETS_MAX = 1024
"""The most texts (memories) one item may be embedded as."""

DEFAULT_FIELDS = ("$",)
"""LangGraph's default index fields: the whole value as one text."""


def as_json(value: Mapping[str, Any]) -> str:
    """A value as the text that stands for it when no field gives one (LangGraph's ``"$"``).

    Args:
        value: the item's value.

    Returns:
        Its JSON, keys sorted, non-ASCII kept.
    """
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


class CheckedDims(Embeddings):
    """An embedding model whose every vector must have the index's ``dims`` numbers."""

    def __init__(self, model: Embeddings, dims: int) -> None:
        self.model, self.dims = model, dims

    def _checked(self, vectors: list[list[float]]) -> list[list[float]]:
        for vector in vectors:
            if len(vector) != self.dims:
                msg = (f"index.dims: the embedding model gave a vector of {len(vector)} "
                       f"numbers; the index says {self.dims}")
                raise ValidationError(msg, field="index.dims")
        return vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._checked(self.model.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._checked([self.model.embed_query(text)])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._checked(await self.model.aembed_documents(texts))

    async def aembed_query(self, text: str) -> list[float]:
        return self._checked([await self.model.aembed_query(text)])[0]


@dataclass(frozen=True)
class ItemIndex:
    """How a store finds the texts of an item.

    Attributes:
        config: the ``IndexConfig`` given (None: the store's earlier reading).
        embeddings: the model (None: the bundled one), as ``embed`` named it.
        fields: the default field paths (with an ``IndexConfig``).
        text_field: the value field read without an ``IndexConfig``.
        embed_with: what the streams embed with: the model, its vectors checked against
            ``dims`` when given.
    """

    config: IndexConfig | None
    embeddings: Embeddings | None
    fields: tuple[str, ...]
    text_field: str
    embed_with: Embeddings | None

    @classmethod
    def made(cls, index: IndexConfig | None, embeddings: Embeddings | None,
             text_field: str) -> ItemIndex:
        """Check an ``IndexConfig`` and resolve its model.

        Args:
            index: the ``IndexConfig`` (None: no index; ``embeddings`` and ``text_field``
                as before).
            embeddings: the store's ``embeddings`` argument.
            text_field: the store's ``text_field`` argument.

        Returns:
            The item index.

        Raises:
            ValidationError: an unknown key, a bad ``dims`` or ``fields``, an ``embed`` that
                is no model, or ``embeddings`` given beside ``index["embed"]``.
        """
        if index is None:
            return cls(None, embeddings, (), text_field, embeddings)
        if not isinstance(index, Mapping):
            msg = f"index: expected an IndexConfig dict, got {type(index).__name__}"
            raise ValidationError(msg, field="index")
        known = {"dims", "embed", "fields", "text_fields", "distance_type", "ann_index_config"}
        unknown = sorted(set(index) - known)
        if unknown:
            msg = f"index: unknown key {unknown[0]!r}; an IndexConfig has dims, embed, fields"
            raise ValidationError(msg, field="index")
        model = _model(index.get("embed"), embeddings)
        dims = index.get("dims")
        if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
            msg = f"index.dims: expected a whole number >= 1, got {dims!r}"
            raise ValidationError(msg, field="index.dims")
        checked = model if dims is None or model is None else CheckedDims(model, dims)
        fields = index.get("fields") or index.get("text_fields") or list(DEFAULT_FIELDS)
        return cls(dict(index), model, _paths(fields, "index.fields"), text_field,  # type: ignore[arg-type]
                   checked)

    def texts(self, value: Mapping[str, Any], index: Sequence[str] | bool | None) -> list[str]:
        """The texts an item is embedded as, each once, in order (none: not ranked).

        Args:
            value: the item's value.
            index: the put's ``index`` (None: the store's fields; False: nothing).

        Returns:
            The texts (blank ones left out).

        Raises:
            ValidationError: ``index`` is not False or a list of paths, or the value gives
                more than :data:`FACETS_MAX` texts.
        """
        if index is False:
            return []
        if index is None and self.config is None:
            text = value.get(self.text_field)
            return [text] if isinstance(text, str) and text.strip() else [as_json(value)]
        paths = self.fields if index is None else _paths(index, "index")
        found: dict[str, None] = {}
        for path in paths:
            for text in get_text_at_path(value, path if path == "$" else _tokens(path)):
                if text.strip():
                    found[text] = None
        if len(found) > FACETS_MAX:
            msg = (f"index: the value gives {len(found)} texts to embed; an item is embedded "
                   f"as at most {FACETS_MAX}")
            raise ValidationError(msg, field="index")
        return list(found)


def _model(embed: Any, embeddings: Embeddings | None) -> Embeddings | None:
    """The model an ``IndexConfig``'s ``embed`` names (None: the bundled one)."""
    if embed is None:
        return embeddings
    if embeddings is not None:
        msg = "index: give the model as index['embed'] or as embeddings=, not both"
        raise ValidationError(msg, field="index.embed")
    if not (isinstance(embed, (Embeddings, str)) or callable(embed)):
        msg = (f"index.embed: expected an Embeddings, a function of texts or a provider "
               f"string such as 'openai:text-embedding-3-small', got {type(embed).__name__}")
        raise ValidationError(msg, field="index.embed")
    try:
        return ensure_embeddings(embed)
    except (ValueError, ImportError) as e:
        msg = f"index.embed: {embed!r} is no embedding model here ({str(e).splitlines()[0]})"
        raise ValidationError(msg, field="index.embed") from None


def _paths(given: Any, field: str) -> tuple[str, ...]:
    """Field paths as given, checked: a list of non-empty texts."""
    if isinstance(given, str) or not isinstance(given, Sequence) or not all(
        isinstance(p, str) and p for p in given
    ):
        msg = f"{field}: expected False or a list of field paths such as ['text'], got {given!r}"
        raise ValidationError(msg, field=field)
    return tuple(given)


_TOKENS: dict[str, list[str]] = {}


def _tokens(path: str, tokenize: Callable[[str], list[str]] = tokenize_path) -> list[str]:
    """A path's tokens (kept: the same few paths are read for every put)."""
    held = _TOKENS.get(path)
    if held is None:
        if len(_TOKENS) > 4096:
            _TOKENS.clear()
        held = _TOKENS[path] = tokenize(path)
    return held
