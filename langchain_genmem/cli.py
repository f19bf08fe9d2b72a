"""The ``genmem`` command line: a thin shell over the library.

Every command works on one persona's memory stream in an embedded Chroma folder (``--path``,
default ``./.genmem``) or on a Chroma server (``--chroma-host``/``--chroma-port``). Errors of
the library are printed as one line saying what to do, with exit code 2 for bad input or
missing setup and 1 for anything else. ``genmem demo`` runs offline on the bundled fixture.

Example:
    .. code-block:: console

        $ genmem import "storage/sim/personas/Maria Lopez/bootstrap_memory/associative_memory"
        $ genmem search "Klaus Mueller's research paper" -k 5
        $ genmem --now "2023-02-13 18:00:00" search "breakfast" --recency-w 6 --json
        $ genmem explain "breakfast" -o explain.png
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from langchain_genmem.errors import (
    ConfigurationError,
    GenMemError,
    StorageError,
    ValidationError,
)
from langchain_genmem.interop.generative_agents import (
    NODES_FILE,
    SCRATCH_TIME_FORMAT,
    FixedClock,
    dump_associative_memory,
    import_storage,
    load_associative_memory,
    persona_of,
    scratch_time,
)
from langchain_genmem.llm import chat_model_from_env

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from langchain_genmem.backends.chroma import ChromaBackend
    from langchain_genmem.retrievers import GenerativeAgentsRetriever
    from langchain_genmem.store import MemoryStream

DEFAULT_FIXTURE = Path(
    "data/generative_agents/July1_the_ville_isabella_maria_klaus-step-3-12/personas/"
    "Maria Lopez/bootstrap_memory/associative_memory"
)
_CLI_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_WIDTH = 120  # when stdout is not a terminal (pipes, `make demo | tee`, tests)
COMPONENTS = ("recency", "relevance", "importance")
DEFAULT_PATH = Path(".genmem")
DEFAULT_PNG = Path("genmem-explain.png")
_TABLE_COLUMNS = ("#", "node", "type", "created", "score", "recency", "relevance", "importance")
_TABLE_WIDTH = 76  # cells the columns before the description take (padding and rules included)
_CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "WenQuanYi Zen Hei", "SimHei", "Microsoft YaHei")


class _HintingGroup(TyperGroup):
    """Turns library errors into one-line hints and exit codes (2: input or setup, 1: other)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except GenMemError as e:
            typer.echo(f"error: {e}", err=True)
            code = 2 if isinstance(e, (ValidationError, ConfigurationError)) else 1
            raise typer.Exit(code) from None


app = typer.Typer(
    cls=_HintingGroup,
    name="genmem",
    help="Generative Agents memory streams: import, search, explain and reflect.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class RecencyMode(str, Enum):
    """The recency modes of :class:`~langchain_genmem.GenerativeAgentsRetriever`."""

    hours = "hours"
    rank = "rank"
    reverie = "reverie"


class NodeKind(str, Enum):
    """The kinds of memory ``genmem add`` writes."""

    event = "event"
    thought = "thought"
    chat = "chat"


# ---------------------------------------------------------------------------- options

K = Annotated[int, typer.Option("-k", min=0, help="How many memories to show.")]
Mode = Annotated[
    RecencyMode,
    typer.Option(
        "--recency-mode",
        help="hours: decay ** hours since last access (the paper); rank: decay ** position "
        "by last access; reverie: the original code exactly.",
    ),
]
RecencyW = Annotated[
    float | None, typer.Option("--recency-w", help="Recency weight (default: the persona's).")
]
RelevanceW = Annotated[
    float | None, typer.Option("--relevance-w", help="Relevance weight (default: the persona's).")
]
ImportanceW = Annotated[
    float | None,
    typer.Option("--importance-w", help="Importance weight (default: the persona's)."),
]
Decay = Annotated[
    float | None,
    typer.Option("--decay", help="Recency decay per hour or per rank (default: the persona's)."),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


@dataclass
class Weights:
    """Retrieval options shared by ``search``, ``explain`` and ``demo``.

    Attributes:
        mode: recency mode.
        recency_w: recency weight, None for the persona's.
        relevance_w: relevance weight, None for the persona's.
        importance_w: importance weight, None for the persona's.
        decay: recency decay, None for the persona's.
    """

    mode: RecencyMode = RecencyMode.hours
    recency_w: float | None = None
    relevance_w: float | None = None
    importance_w: float | None = None
    decay: float | None = None

    def retriever(self, stream: MemoryStream, k: int, *, touch: bool) -> GenerativeAgentsRetriever:
        """A retriever over the stream with these options.

        Args:
            stream: the stream.
            k: how many documents.
            touch: update ``last_accessed`` of what is returned.

        Returns:
            The retriever.
        """
        from langchain_genmem.retrievers import GenerativeAgentsRetriever

        return GenerativeAgentsRetriever(
            stream=stream,
            k=k,
            recency_mode=self.mode.value,
            recency_decay=self.decay,
            recency_w=self.recency_w,
            relevance_w=self.relevance_w,
            importance_w=self.importance_w,
            update_access=touch,
        )


@dataclass
class Store:
    """Where the memories live, from the global options.

    Attributes:
        path: the embedded Chroma folder.
        host: a Chroma server's host, or None for the embedded folder.
        port: the Chroma server's port.
        collection: the Chroma collection.
        persona: the persona asked for, or None.
        now: the time asked for, or None.
    """

    path: Path
    host: str | None = None
    port: int = 8000
    collection: str = "genmem"
    persona: str | None = None
    now: datetime | None = None
    _client: Any = field(default=None, repr=False)
    _opened: list[MemoryStream] = field(default_factory=list, repr=False)

    def client(self) -> Any:
        """The chromadb client (opened once).

        Returns:
            A ``PersistentClient`` on ``path`` or an ``HttpClient`` on ``host:port``.

        Raises:
            StorageError: the store cannot be opened or the server not reached.
        """
        if self._client is None:
            import chromadb

            # Chroma's default settings, as MemoryStream uses: Chroma refuses a second client
            # of one folder with other settings.
            try:
                if self.host:
                    self._client = chromadb.HttpClient(host=self.host, port=self.port)
                else:
                    self._client = chromadb.PersistentClient(path=str(self.path))
            except Exception as e:  # noqa: BLE001 - chromadb raises many kinds
                msg = f"cannot open {self.where()} ({_first_line(e)})"
                if self.host:
                    msg = f"{msg}; start it (chroma run --port N) or drop --chroma-host"
                raise StorageError(msg) from e
        return self._client

    def where(self) -> str:
        """The store in words."""
        if self.host:
            return f"the Chroma server at {self.host}:{self.port}"
        return f"the store at {self.path}"

    def backend(self) -> ChromaBackend:
        """The storage backend on the collection."""
        from langchain_genmem.backends.chroma import ChromaBackend

        return ChromaBackend(self.client(), self.collection)

    def open(self) -> MemoryStream:
        """The persona's stream, its clock set (``--now``, else the saved simulation time).

        Returns:
            The stream.

        Raises:
            ValidationError: no persona was named and the store does not hold exactly one.
        """
        from langchain_genmem.store import MemoryStream

        backend = self.backend()
        persona = self.persona or self._only_persona(backend.personas())
        stream = self.track(MemoryStream(persona, backend=backend))
        if self.now is not None:
            stream.clock = FixedClock(self.now)
        else:
            when = scratch_time(stream.state.extra)
            if when is not None:
                stream.clock = FixedClock(when)
        return stream

    def track(self, stream: MemoryStream) -> MemoryStream:
        """Remember a stream so :meth:`close` flushes it when the command ends.

        Args:
            stream: the stream.

        Returns:
            The same stream.
        """
        self._opened.append(stream)
        return stream

    def close(self) -> None:
        """Flush deferred access times of every stream the command opened."""
        for stream in self._opened:
            stream.close()

    def stream_kwargs(self) -> dict[str, Any]:
        """What the importers pass on to each new stream."""
        clock = FixedClock(self.now) if self.now is not None else None
        return {"client": self.client(), "collection_name": self.collection, "clock": clock}

    def _only_persona(self, personas: Sequence[str]) -> str:
        if len(personas) == 1:
            return personas[0]
        if not personas:
            msg = (
                f"{self.where()} holds no memories yet; run "
                "`genmem import FOLDER` or `genmem --persona NAME add ...`"
            )
        else:
            msg = f"the store holds several personas ({', '.join(personas)}); choose with --persona"
        raise ValidationError(msg, field="persona")


def _store(ctx: typer.Context) -> Store:
    return ctx.ensure_object(Store)


@app.callback()
def _main(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Option("--path", help="Folder of the embedded Chroma store (created if missing)."),
    ] = DEFAULT_PATH,
    chroma_host: Annotated[
        str | None,
        typer.Option("--chroma-host", help="Use the Chroma server on this host instead of --path."),
    ] = None,
    chroma_port: Annotated[
        int, typer.Option("--chroma-port", help="Port of the Chroma server.")
    ] = 8000,
    collection: Annotated[
        str, typer.Option("--collection", help="Chroma collection holding the memories.")
    ] = "genmem",
    persona: Annotated[
        str | None,
        typer.Option(
            "--persona",
            envvar="GENMEM_PERSONA",
            help="Persona to work on (default: the only one in the store).",
        ),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            help="Current time, e.g. '2023-02-13 18:00:00' (default: the imported simulation's "
            "curr_time, else the wall clock).",
        ),
    ] = None,
) -> None:
    """Generative Agents memory streams: import, search, explain and reflect."""
    when = parse_time(now, "--now") if now is not None else None
    ctx.obj = Store(path, chroma_host, chroma_port, collection, persona, when)
    ctx.call_on_close(ctx.obj.close)


# ---------------------------------------------------------------------------- commands


@app.command("import")
def import_(
    ctx: typer.Context,
    folder: Annotated[
        Path,
        typer.Argument(
            help="An associative_memory folder (nodes.json...) or a simulation folder with "
            "personas/<name>/bootstrap_memory/associative_memory inside."
        ),
    ],
    reembed: Annotated[
        bool | None,
        typer.Option(
            "--reembed/--keep-vectors",
            help="Embed every memory again, or keep the saved vectors (default: keep them "
            "when their size fits the model).",
        ),
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show progress bars while embedding.")
    ] = True,
) -> None:
    """Import the original simulation's saved memories (one persona or a whole simulation)."""
    store = _store(ctx)
    started = time.perf_counter()
    options = {"reembed": reembed, "progress": progress, **store.stream_kwargs()}
    if (folder / NODES_FILE).exists():
        name = store.persona or persona_of(folder)
        if name is None:
            msg = f"cannot tell the persona from {folder}; give --persona NAME"
            raise ValidationError(msg, field="persona")
        streams = {name: load_associative_memory(folder, persona=name, **options)}
    else:
        wanted = [store.persona] if store.persona else None
        streams = import_storage(folder, personas=wanted, **options)
    seconds = time.perf_counter() - started
    for name, stream in streams.items():
        store.track(stream)
        typer.echo(f"Imported {name}: {_counts(stream)}, {stream.state.dim}-d vectors")
    typer.echo(f"into {store.where()} in {seconds:.1f} s")


@app.command()
def export(
    ctx: typer.Context,
    folder: Annotated[
        Path,
        typer.Argument(
            help="The associative_memory folder to write; scratch.json goes to its parent."
        ),
    ],
) -> None:
    """Export a persona in the original format (nodes.json, embeddings.json, kw_strength.json)."""
    stream = _store(ctx).open()
    dump_associative_memory(stream, folder)
    typer.echo(f"Exported {stream.persona}: {_counts(stream)} to {folder}")


@app.command()
def add(
    ctx: typer.Context,
    kind: Annotated[NodeKind, typer.Argument(help="event, thought or chat.")],
    description: Annotated[str, typer.Argument(help="The memory in words.")],
    poignancy: Annotated[
        float, typer.Option("--poignancy", help="Importance, 1 (mundane) to 10 (poignant).")
    ],
    subject: Annotated[
        str | None, typer.Option("--subject", help="Triple subject (default: the persona).")
    ] = None,
    predicate: Annotated[str, typer.Option("--predicate", help="Triple predicate.")] = "",
    object_: Annotated[str, typer.Option("--object", help="Triple object.")] = "",
    keyword: Annotated[
        list[str] | None,
        typer.Option("--keyword", help="A keyword (repeat; default: from the triple)."),
    ] = None,
    evidence: Annotated[
        list[str] | None,
        typer.Option("--evidence", help="A thought's evidence node id (repeat)."),
    ] = None,
    line: Annotated[
        list[str] | None,
        typer.Option("--line", help="A chat line 'speaker: utterance' (repeat)."),
    ] = None,
    created: Annotated[
        str | None, typer.Option("--created", help="When it happened (default: now).")
    ] = None,
    expiration: Annotated[
        str | None, typer.Option("--expiration", help="When it expires (default: never).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Add an event, a thought or a chat to the persona's stream."""
    item: dict[str, Any] = {
        "type": kind.value,
        "description": description,
        "poignancy": poignancy,
        "subject": subject,
        "predicate": predicate,
        "object": object_,
        "keywords": keyword or None,
    }
    if created is not None:
        item["created"] = parse_time(created, "--created")
    if expiration is not None:
        item["expiration"] = parse_time(expiration, "--expiration")
    if evidence:
        item["evidence"] = evidence
    if line:
        item["filling"] = [_chat_line(x) for x in line]
    stream = _store(ctx).open()
    node = stream.add_many([item])[0]
    if as_json:
        _echo_json(node.model_dump())
    else:
        typer.echo(f"Added {node.node_id} ({node.type}, depth {node.depth}) to {stream.persona}")


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The focal point to retrieve memories for.")],
    k: K = 10,
    mode: Mode = RecencyMode.hours,
    recency_w: RecencyW = None,
    relevance_w: RelevanceW = None,
    importance_w: ImportanceW = None,
    decay: Decay = None,
    filter_: Annotated[
        str | None,
        typer.Option(
            "--filter",
            help="Keep rows passing e.g. 'relevance > 0.5 and type == \"thought\"' (needs pandas).",
        ),
    ] = None,
    peek: Annotated[
        bool, typer.Option("--peek", help="Do not update last_accessed of what is returned.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Weighted retrieval (recency, relevance, importance), with each memory's components."""
    stream = _store(ctx).open()
    weights = Weights(mode, recency_w, relevance_w, importance_w, decay)
    retriever = weights.retriever(stream, k, touch=not peek)
    rows = retrieve_rows(retriever, query, k, filter_)
    if as_json:
        _echo_json(rows)
        return
    console = _console()
    console.print(score_table(rows, title=f"{stream.persona}: {query}"))
    console.print(formula(retriever), highlight=False)


@app.command()
def keywords(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="Subject of the perceived event.")],
    predicate: Annotated[str, typer.Argument(help="Predicate of the perceived event.")],
    object_: Annotated[
        str, typer.Argument(metavar="OBJECT", help="Object of the perceived event.")
    ],
    limit: Annotated[int, typer.Option("--limit", min=0, help="Memories shown per type.")] = 10,
    as_json: AsJson = False,
) -> None:
    """The original's keyword retrieval: events and thoughts indexed under s, p or o."""
    stream = _store(ctx).open()
    report = keyword_report(stream, (subject, predicate, object_), limit)
    _show(report, print_keyword_report, as_json)


@app.command()
def stats(
    ctx: typer.Context,
    top: Annotated[
        int, typer.Option("--top", min=0, help="Keyword strengths shown per type.")
    ] = 10,
    as_json: AsJson = False,
) -> None:
    """Counts per type, depths, keyword strengths, reflection trigger and settings."""
    _show(stream_stats(_store(ctx).open(), top), print_stats, as_json)


@app.command()
def explain(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The focal point to explain.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The PNG file to write.")
    ] = DEFAULT_PNG,
    k: K = 10,
    mode: Mode = RecencyMode.hours,
    recency_w: RecencyW = None,
    relevance_w: RelevanceW = None,
    importance_w: ImportanceW = None,
    decay: Decay = None,
) -> None:
    """Save a PNG of the weighted score components of the top memories (needs matplotlib)."""
    stream = _store(ctx).open()
    weights = Weights(mode, recency_w, relevance_w, importance_w, decay)
    retriever = weights.retriever(stream, k, touch=False)
    rows = retrieve_rows(retriever, query, k, None)
    save_explain_png(rows, retriever, f"{stream.persona}: {query}", output)
    typer.echo(f"Saved {output}: score components of the top {len(rows)} memories for {query!r}")


@app.command()
def reflect(
    ctx: typer.Context,
    force: Annotated[
        bool, typer.Option("--force", help="Reflect even if the importance trigger has not fired.")
    ] = False,
) -> None:
    """Run the reflection graph with an OpenAI-compatible chat model (OPENAI_* variables)."""
    model = chat_model_from_env()
    stream = _store(ctx).open()
    try:
        from langchain_genmem.reflection import create_reflection_graph
    except ImportError as e:
        msg = f"the reflection graph is not available in this installation ({e})"
        raise ConfigurationError(msg) from e
    out = create_reflection_graph(model, stream, force=force).invoke({})
    typer.echo(f"status: {out['status']}")
    for node_id in out.get("written", []):
        node = stream.get(node_id)
        typer.echo(f"{node_id}: {node.description}")
        for ev in node.evidence:
            typer.echo(f"    evidence {ev}: {stream.get(ev).description}")
    typer.echo(f"llm calls: {out.get('llm_calls', 0)}")


@app.command()
def demo(
    folder: Annotated[
        Path | None,
        typer.Argument(
            help="An associative_memory folder (default: the bundled Maria Lopez fixture)."
        ),
    ] = None,
    k: K = 5,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show the embedding progress bar.")
    ] = True,
) -> None:
    """Offline tour: import a persona into a temporary store and show retrieval at work."""
    run_demo(_console(), folder or _fixture(), k=k, progress=progress)


def main() -> None:
    """Entry point of the ``genmem`` command."""
    app()


# ---------------------------------------------------------------------------- shared views


def retrieve_rows(
    retriever: GenerativeAgentsRetriever, query: str, k: int, filter_: str | None
) -> list[dict[str, Any]]:
    """Retrieved memories as flat rows (metadata and description), best first.

    Args:
        retriever: the retriever.
        query: the focal point.
        k: how many.
        filter_: a filter expression (needs pandas), or None.

    Returns:
        The rows.
    """
    from langchain_genmem.dataframe import document_row, retrieve_memories

    if filter_ is None:
        docs = retriever.retrieve_with_report(query, k=k).documents
        return [document_row(d) for d in docs]
    return retrieve_memories(retriever, query, k=k, filter=filter_).to_dict("records")


def effective_gains(retriever: GenerativeAgentsRetriever) -> dict[str, float]:
    """What each normalised component is multiplied by: persona or given weight × gain.

    Args:
        retriever: the retriever.

    Returns:
        ``{"recency": ..., "relevance": ..., "importance": ...}``.
    """
    w = retriever.effective_weights()
    weights = (w.recency_w, w.relevance_w, w.importance_w)
    return {n: x * g for n, x, g in zip(COMPONENTS, weights, w.gains, strict=True)}


def formula(retriever: GenerativeAgentsRetriever) -> str:
    """The score formula a retriever applies, e.g. ``score = 0.5×recency + 3×relevance + ...``.

    Args:
        retriever: the retriever.

    Returns:
        The formula, with the recency mode and decay.
    """
    parts = " + ".join(f"{_num(g)}×{n}" for n, g in effective_gains(retriever).items())
    decay = retriever.recency_decay
    if decay is None:
        decay = retriever.memory_stream.state.recency_decay
    return f"score = {parts}  (recency mode {retriever.recency_mode}, decay {_num(decay)})"


def score_table(
    rows: Sequence[Mapping[str, Any]], *, title: str | None, width: int | None = None
) -> Table:
    """A rich table of memories with their normalised score components.

    Args:
        rows: rows from :func:`retrieve_rows`.
        title: the table's title.
        width: fit the table in this many cells by cutting descriptions to one line; None
            wraps them instead.

    Returns:
        The table.
    """
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, box=None, title_justify="left", pad_edge=False, header_style="bold")
    for name in _TABLE_COLUMNS:
        justify = "left" if name in ("node", "type") else "right"
        table.add_column(name, justify=justify, no_wrap=True)
    table.add_column("description", overflow="fold")
    room = None if width is None else max(20, width - _TABLE_WIDTH)
    for i, r in enumerate(rows, start=1):
        text = Text(r["description"])
        if room is not None:
            text.truncate(room, overflow="ellipsis")
        table.add_row(
            str(i),
            r["node_id"],
            r["type"],
            f"{r['created']:%m-%d %H:%M}",
            *(f"{r[c]:.2f}" for c in ("score", *COMPONENTS)),
            text,
        )
    return table


def keyword_report(stream: MemoryStream, spo: tuple[str, str, str], limit: int) -> dict[str, Any]:
    """The keyword retrieval for a triple, as JSON-ready data.

    Args:
        stream: the stream.
        spo: subject, predicate, object.
        limit: memories listed per type.

    Returns:
        ``{"query", "strength", "events", "thoughts"}``; the lists hold counts and the
        newest memories.
    """
    strength = stream.kw_strength
    found = {
        "events": stream.retrieve_relevant_events(*spo),
        "thoughts": stream.retrieve_relevant_thoughts(*spo),
    }
    return {
        "query": list(spo),
        "strength": {
            t: {kw: strength[t].get(kw.lower(), 0) for kw in spo if kw}
            for t in ("event", "thought")
        },
        **{
            name: {
                "count": len(nodes),
                "newest": [_brief(n) for n in nodes[:limit]],
            }
            for name, nodes in found.items()
        },
    }


def print_keyword_report(console: Console, report: Mapping[str, Any]) -> None:
    """Print :func:`keyword_report` as text.

    Args:
        console: where to print.
        report: the report.
    """
    terms = ", ".join(repr(t) for t in report["query"])
    for name in ("events", "thoughts"):
        part = report[name]
        console.print(f"{name} indexed under {terms}: {part['count']}", highlight=False)
        for n in part["newest"]:
            console.print(f"  {n['node_id']:>9}  {n['created'][5:16]}  {n['description']}",
                          highlight=False, overflow="ellipsis", no_wrap=True)
    for kind, counts in report["strength"].items():
        shown = ", ".join(f"{kw} {v}" for kw, v in counts.items())
        console.print(f"{kind} keyword strength: {shown}", highlight=False)


def stream_stats(stream: MemoryStream, top: int) -> dict[str, Any]:
    """What ``genmem stats`` shows, as JSON-ready data.

    Args:
        stream: the stream.
        top: keyword strengths listed per type.

    Returns:
        Counts, depth histogram, strengths, trigger state, settings and clock.
    """
    state = stream.state
    nodes = stream.nodes()
    return {
        "persona": stream.persona,
        "memories": len(stream),
        "types": {t: sum(n.type == t for n in nodes) for t in ("event", "thought", "chat")},
        "depths": dict(sorted(Counter(n.depth for n in nodes).items())),
        "keyword_strength": {
            t: dict(Counter(m).most_common(top)) for t, m in stream.kw_strength.items()
        },
        "trigger": {
            "importance_trigger_curr": _num(state.importance_trigger_curr),
            "importance_trigger_max": _num(state.importance_trigger_max),
            "importance_ele_n": state.importance_ele_n,
            "reflection_due": state.reflection_due,
        },
        "settings": {
            name: _num(getattr(state, name))
            for name in ("recency_w", "relevance_w", "importance_w", "recency_decay")
        },
        "vector_size": state.dim,
        "clock": stream.clock(),
    }


def print_stats(console: Console, report: Mapping[str, Any]) -> None:
    """Print :func:`stream_stats` as text.

    Args:
        console: where to print.
        report: the stats.
    """
    types = ", ".join(_plural(n, t) for t, n in report["types"].items())
    depths = ", ".join(f"{d}: {n}" for d, n in report["depths"].items())
    trig = report["trigger"]
    due = "due" if trig["reflection_due"] else "not due"
    lines = [
        f"{report['persona']}: {_plural(report['memories'], 'memory', 'memories')} ({types}); "
        f"{report['vector_size']}-d vectors; clock {report['clock']:{_CLI_TIME_FORMAT}}",
        f"depth histogram: {depths}",
        f"reflection trigger: {trig['importance_trigger_curr']} of "
        f"{trig['importance_trigger_max']} left after {trig['importance_ele_n']} events ({due})",
        "settings: " + ", ".join(f"{k} {v}" for k, v in report["settings"].items()),
    ]
    for kind, counts in report["keyword_strength"].items():
        lines.append(f"top {kind} keywords: " + ", ".join(f"{kw} {v}" for kw, v in counts.items()))
    for text in lines:
        console.print(text, highlight=False)


def save_explain_png(
    rows: Sequence[Mapping[str, Any]],
    retriever: GenerativeAgentsRetriever,
    title: str,
    output: Path,
) -> None:
    """Save stacked horizontal bars of each memory's weighted score components.

    Args:
        rows: rows from :func:`retrieve_rows`, best first.
        retriever: the retriever that ranked them (for its weights).
        title: the chart's title.
        output: the PNG file.

    Raises:
        ConfigurationError: matplotlib is not installed.
    """
    from langchain_genmem.extras import require_extra

    require_extra("matplotlib", "plot", "explain")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    gains = effective_gains(retriever)
    fig = Figure(figsize=(11, 1.2 + 0.45 * max(len(rows), 1)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    labels = [f"{r['node_id']}  {_cut(r['description'], 60)}" for r in rows][::-1]
    left = [0.0] * len(rows)
    for (name, gain), color in zip(gains.items(), ("#4c72b0", "#55a868", "#c44e52"), strict=True):
        widths = [gain * r[name] for r in rows][::-1]
        ax.barh(labels, widths, left=left, color=color, label=f"{_num(gain)}×{name}")
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_xlabel("score (weighted, normalised components)")
    ax.set_title(title, loc="left")
    ax.legend(loc="lower right")
    ax.tick_params(axis="y", labelsize=8)
    family = ["DejaVu Sans", *_installed_fonts(_CJK_FONTS)]
    for text in (*ax.get_yticklabels(), ax.title):
        text.set_fontfamily(family)
    output.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Glyph.*missing")
        fig.savefig(output, format="png", dpi=110)


# ---------------------------------------------------------------------------- demo


def run_demo(console: Console, folder: Path, *, k: int, progress: bool) -> None:
    """The ``genmem demo`` tour (offline, temporary in-memory store).

    Args:
        console: where to print.
        folder: an ``associative_memory`` folder.
        k: memories per table.
        progress: show the embedding progress bar.
    """
    started = time.perf_counter()
    persona = persona_of(folder) or "demo persona"
    say = _sayer(console)
    say("genmem demo", "Generative Agents memory offline; default model "
        "multilingual-e5-small (384-d)")
    stream = load_associative_memory(folder, persona=persona, progress=progress)
    imported = time.perf_counter() - started
    then = stream.clock()
    say("1. Import", f"{persona}: {len(stream)} memories re-embedded in {imported:.1f} s; "
        f"clock = saved curr_time {then:{_CLI_TIME_FORMAT}}")
    focal = "breakfast and morning routine"
    sections = [
        ("2. Relevance", f"{focal!r}, weights 0/1/0: meaning alone ranks",
         Weights(recency_w=0, importance_w=0)),
        ("3. Importance", "same focal point, the paper's weights 1/1/1: poignant memories climb",
         Weights()),
        ("4. Recency", "recency weight 6: this afternoon's memories come first",
         Weights(recency_w=6)),
    ]
    for name, why, weights in sections:
        say(name, why)
        retriever = weights.retriever(stream, k, touch=False)
        rows = retrieve_rows(retriever, focal, k, None)
        console.print(score_table(rows, title=None, width=console.width))
        console.print(f"   {formula(retriever)}", highlight=False)
    retrieve_rows(Weights().retriever(stream, 3, touch=True), focal, 3, None)
    later = then + timedelta(hours=3)
    stream.clock = FixedClock(later)
    say("5. Recall", f"the top 3 of 3. are retrieved at {then:%H:%M} (last_accessed := now); "
        f"at {later:%H:%M} the query of 4. puts them first")
    rows = retrieve_rows(sections[-1][2].retriever(stream, k, touch=False), focal, k, None)
    console.print(score_table(rows, title=None, width=console.width))
    newest = stream.nodes("event")[0]
    say("6. Keywords", f"the original's retrieve() for the newest event {newest.description!r}")
    print_keyword_report(console, keyword_report(stream, newest.spo, 3))
    say("7. Stats", "counts, depths, reflection trigger, settings, keyword strengths")
    print_stats(console, stream_stats(stream, 5))
    console.print(f"\nDone in {time.perf_counter() - started:.1f} s "
                  f"(import {imported:.1f} s).", highlight=False)


def _fixture() -> Path:
    here = Path(__file__).resolve().parents[1]
    for base in (Path.cwd(), here):
        if (base / DEFAULT_FIXTURE / NODES_FILE).exists():
            return base / DEFAULT_FIXTURE
    msg = f"no folder given and the bundled fixture {DEFAULT_FIXTURE} is not here; pass one"
    raise ValidationError(msg, field="folder")


def _sayer(console: Console) -> Any:
    def say(head: str, text: str) -> None:
        console.print(f"\n[bold]{head}[/bold]  {_escape(text)}", highlight=False)

    return say


# ---------------------------------------------------------------------------- helpers


def parse_time(text: str, option: str) -> datetime:
    """A time given on the command line.

    ISO (``2023-02-13 18:00:00``) or the original's ``February 13, 2023, 18:00:00``.

    Args:
        text: the text.
        option: the option, named in the error.

    Returns:
        The (naive) datetime.

    Raises:
        ValidationError: neither format.
    """
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        pass
    try:
        return datetime.strptime(text.strip(), SCRATCH_TIME_FORMAT)
    except ValueError:
        msg = f"{option}: {text!r} is not a time like '2023-02-13 18:00:00'"
        raise ValidationError(msg, field=option) from None


def _chat_line(text: str) -> list[str]:
    for sep in (":", "："):
        speaker, found, utterance = text.partition(sep)
        if found and speaker.strip() and utterance.strip():
            return [speaker.strip(), utterance.strip()]
    msg = f"--line: {text!r} is not 'speaker: utterance'"
    raise ValidationError(msg, field="--line")


def _counts(stream: MemoryStream) -> str:
    types = stream.state.type_count
    parts = ", ".join(_plural(types.get(t, 0), t) for t in ("event", "thought", "chat"))
    return f"{_plural(len(stream), 'memory', 'memories')} ({parts})"


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _brief(node: Any) -> dict[str, Any]:
    return {
        "node_id": node.node_id,
        "type": node.type,
        "created": node.created.strftime(_CLI_TIME_FORMAT),
        "poignancy": _num(node.poignancy),
        "description": node.description,
    }


def _console() -> Console:
    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else _WIDTH, highlight=False)


def _show(report: Mapping[str, Any], printer: Any, as_json: bool) -> None:
    if as_json:
        _echo_json(report)
    else:
        printer(_console(), report)


def _echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return None if value != value else value.strftime(_CLI_TIME_FORMAT)  # NaT != NaT
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Enum):
        return value.value
    return str(value)


def _installed_fonts(names: Sequence[str]) -> list[str]:
    from matplotlib import font_manager

    present = {f.name for f in font_manager.fontManager.ttflist}
    return [n for n in names if n in present]


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(float(value), 4)


def _cut(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


if __name__ == "__main__":  # pragma: no cover
    main()
