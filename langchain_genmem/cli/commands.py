"""The ``genmem`` commands, from ``import`` to ``reflect``.

import, export, add, forget, compact, search, keywords, stats, explain, tune, reflect;
``demo`` comes last.

They are registered on the app in this order, the order the help lists them.
"""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from langchain_genmem.backends.base import compaction_of
from langchain_genmem.cli.app import app
from langchain_genmem.cli.chart import checked_output, save_explain_png
from langchain_genmem.cli.demo import bundled_fixture, run_demo
from langchain_genmem.cli.importing import import_folder
from langchain_genmem.cli.options import (
    AsJson,
    K,
    NodeKind,
    RetrievalOptions,
    ScoreIn,
    ScoreInOption,
    Since,
    Until,
    parse_time,
    renamed,
    weight_options,
)
from langchain_genmem.cli.render import (
    count_text,
    echo_json,
    formula,
    left_out_lines,
    memories,
    print_keyword_report,
    print_stats,
    print_tune_report,
    relevance_formula,
    score_table,
    show,
    stdout_console,
    weighted_table,
)
from langchain_genmem.cli.reports import (
    effective_gains,
    keyword_report,
    persona_examples,
    retrieval_counts,
    retrieve_rows,
    stream_stats,
    time_window_line,
    tune_report,
)
from langchain_genmem.cli.store import Store, store_of
from langchain_genmem.core.errors import ConfigurationError, ValidationError
from langchain_genmem.core.nodes import TYPE_CHOICES, MemoryNode
from langchain_genmem.core.recall_sizes import CHAT_RECALL_K, SHOWN_RECALL_K
from langchain_genmem.llm.limits import CallLimits
from langchain_genmem.memory.expiry import parse_duration
from langchain_genmem.memory.inputs import validate_items
from langchain_genmem.memory.stats import trigger_text
from langchain_genmem.reflection.settings import ReflectionSettings

if TYPE_CHECKING:
    from langchain_genmem.memory.stream import MemoryStream

# A command imports what only it uses (tuning, export, a chat model, the reflection graph)
# when it runs: every `genmem` start-up, `--help` included, would pay for them otherwise.


@app.command("import")
def import_(
    ctx: typer.Context,
    folder: Annotated[
        Path,
        typer.Argument(
            help="A persona's folder (or its associative_memory folder, nodes.json...) or a "
            "simulation folder with personas/<name>/bootstrap_memory/associative_memory inside; "
            "--persona NAME picks a persona, or names the one imported."
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
    """Import the original simulation's saved memories (one persona or a whole simulation).

    --persona NAME imports one persona's folder under that name, also beside the same persona.
    """
    store = store_of(ctx)
    started = time.perf_counter()
    streams = import_folder(store, folder, reembed=reembed, progress=progress)
    seconds = time.perf_counter() - started
    for name, stream in streams.items():
        store.track(stream)
        typer.echo(f"Imported {name}: {count_text(stream)}, {stream.state.dim}-d vectors")
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
    from langchain_genmem.interop.generative_agents import (  # lazy: start-up time
        dump_associative_memory,
    )

    stream = store_of(ctx).open()
    dump_associative_memory(stream, folder)
    typer.echo(f"Exported {stream.persona}: {count_text(stream)} to {folder}")


@app.command()
def add(
    ctx: typer.Context,
    kind: Annotated[NodeKind, typer.Argument(help=f"{TYPE_CHOICES}.")],
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
    expires_in: Annotated[
        str | None,
        typer.Option("--expires-in", help="How long after --created it expires: 30d, 12h, "
                     "90m, 45s, 1d12h or seconds (not with --expiration)."),
    ] = None,
    supersedes: Annotated[
        list[str] | None,
        typer.Option("--supersedes", help="A memory this one corrects (repeat); retrieval "
                     "leaves it out from then on."),
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
    if expires_in is not None:
        item["expires_in"] = parse_duration(expires_in, "--expires-in")
    if supersedes:
        item["supersedes"] = supersedes
    if evidence:
        item["evidence"] = evidence
    if line:
        item["filling"] = [_chat_line(x) for x in line]
    stream, node = _add_item(store_of(ctx), item)
    if as_json:
        echo_json(node.model_dump())
    else:
        typer.echo(f"Added {node.node_id} ({node.type}, depth {node.depth}) to {stream.persona}")


@app.command()
def forget(
    ctx: typer.Context,
    node_ids: Annotated[
        list[str] | None,
        typer.Argument(help="Ids of the memories to forget (node_3 node_9); with options, "
                       "only those of them the options select."),
    ] = None,
    since: Since = None,
    until: Until = None,
    types: Annotated[
        list[str] | None,
        typer.Option("--type", help=f"Only memories of this type: {TYPE_CHOICES} (repeat; "
                     "without it, every type)."),
    ] = None,
    conversation: Annotated[
        str | None, typer.Option("--conversation", help="Only turns of this conversation.")
    ] = None,
    speaker: Annotated[
        str | None, typer.Option("--speaker", help="Only turns this speaker said.")
    ] = None,
    text: Annotated[
        str | None,
        typer.Option("--text", help="Only memories whose description contains this text "
                     "(case-insensitive)."),
    ] = None,
    expired: Annotated[
        bool, typer.Option("--expired", help="Only memories expired at the persona's clock.")
    ] = False,
    every: Annotated[
        bool, typer.Option("--all", help="Forget every memory of the persona (asks first).")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask before --all.")] = False,
    keep_derived: Annotated[
        bool,
        typer.Option("--keep-derived", help="Keep thoughts citing forgotten memories (their "
                     "evidence loses the forgotten ids); by default they are forgotten too."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be forgotten; forget nothing.")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Forget memories for good: by id, by selectors (all must hold), or --all.

    Thoughts citing a forgotten memory go too unless --keep-derived. Numbers are never reused.
    """
    from langchain_genmem.cli.forgetting import (  # lazy: start-up time
        confirm_all,
        report_lines,
    )

    selectors = {"created_after": since, "created_before": until, "types": types,
                 "conversation": conversation, "speaker": speaker, "text": text,
                 "expired": expired or None}
    window = RetrievalOptions(since=since, until=until, types=types)  # checks, naming options
    given = bool(node_ids) or any(v is not None for v in selectors.values())
    if every and given:
        msg = "--all: forgets every memory; give no node id or selector with it"
        raise ValidationError(msg, field="--all")
    if not every and not given:
        msg = ("forget: nothing selected; give node ids, a selector (--since, --until, --type, "
               "--conversation, --speaker, --text, --expired) or --all")
        raise ValidationError(msg, field="node_ids")
    stream = store_of(ctx).open()
    if every:
        if not dry_run and not yes and len(stream):
            confirm_all(stream.persona, len(stream))
        report = stream.forget_all(dry_run=dry_run)
    else:
        times = window.filters(stream.clock())  # relative times read at the persona's clock
        try:
            report = stream.forget(
                node_ids or (), created_after=times["created_after"],
                created_before=times["created_before"], types=times["types"],
                conversation=conversation, speaker=speaker, text=text, expired=expired,
                keep_derived=keep_derived, dry_run=dry_run,
            )
        except ValidationError as e:
            raise renamed(e, _FORGET_OPTIONS.get(e.field or "", e.field or "node_ids")) from None
    if as_json:
        echo_json(report.to_dict())
        return
    shown = {i: stream.get(i) for i in report.forgotten} if dry_run else {}
    for line in report_lines(report, shown):
        typer.echo(line)


@app.command()
def compact(ctx: typer.Context, as_json: AsJson = False) -> None:
    """Rebuild an embedded folder's database: no byte of a deleted memory stays in it.

    A forget erases what it forgets; this clears the copies Chroma's own writes moved.
    """
    store = store_of(ctx)
    compactor = compaction_of(store.backend(create=False))
    report = None if compactor is None else compactor.compact()
    if as_json:
        echo_json({"store": store.where(), "compacted": report is not None, **(report or {})})
    elif report is None:
        typer.echo(f"Nothing to compact in {store.where()}: only an embedded Chroma folder "
                   "is compacted")
    else:
        typer.echo(f"Compacted {store.where()}: chroma.sqlite3 "
                   f"{report['bytes_before'] / 1e6:.1f} MB -> "
                   f"{report['bytes_after'] / 1e6:.1f} MB, "
                   f"{report['free_pages_before']} free pages returned")


_FORGET_OPTIONS = {"created_after": "--since", "created_before": "--until", "types": "--type",
                   "conversation": "--conversation", "speaker": "--speaker", "text": "--text",
                   "expired": "--expired", "node_ids": "node id"}


@app.command()
@weight_options
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The focal point to retrieve memories for.")],
    k: K = SHOWN_RECALL_K,
    *,
    weights: RetrievalOptions,
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
    score_in: ScoreInOption = ScoreIn.process,
    as_json: AsJson = False,
) -> None:
    """Weighted retrieval (recency, relevance, importance), with each memory's components.

    Lexical or hybrid relevance adds the dense and lexical parts to the table (--json has them).
    """
    store = store_of(ctx)
    if score_in is ScoreIn.database and not store.dsn:
        msg = ("--score-in: database ranks in PostgreSQL: give --dsn (or GENMEM_DSN), or use "
               "--score-in process")
        raise ValidationError(msg, field="--score-in")
    stream = store.open()
    retriever = weights.retriever(stream, k, touch=not peek, score_in=score_in)
    rows = retrieve_rows(retriever, query, k, filter_)
    if as_json:
        echo_json(rows)
        return
    console = stdout_console()
    parts = retriever.effective_relevance()[0] != "dense"
    console.print(score_table(rows, title=f"{stream.persona}: {query}", parts=parts))
    console.print(formula(retriever), highlight=False)
    if relevance := relevance_formula(retriever, rows):
        console.print(relevance, highlight=False)
    if window := time_window_line(retriever, query, rows):
        console.print(window, highlight=False)
    counts = retrieval_counts(retriever, query, rows)
    for line in left_out_lines(counts, len(rows), clock=stream.clock(),
                               options=weights.filter_options(), expression=filter_):
        console.print(line, highlight=False)


@app.command()
def keywords(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="Subject of the perceived event.")],
    predicate: Annotated[str, typer.Argument(help="Predicate of the perceived event.")],
    object_: Annotated[
        str, typer.Argument(metavar="object", help="Object of the perceived event.")
    ],
    limit: Annotated[int, typer.Option("--limit", min=0, help="Memories shown per type.")
                     ] = SHOWN_RECALL_K,
    as_json: AsJson = False,
) -> None:
    """The original's keyword retrieval: events and thoughts indexed under s, p or o."""
    stream = store_of(ctx).open()
    report = keyword_report(stream, (subject, predicate, object_), limit)
    show(report, print_keyword_report, as_json)


@app.command()
def stats(
    ctx: typer.Context,
    top: Annotated[
        int, typer.Option("--top", min=0, help="Keyword strengths shown per type.")
    ] = 10,
    as_json: AsJson = False,
) -> None:
    """Counts per type, depths, keyword strengths, reflection trigger and settings."""
    show(stream_stats(store_of(ctx).open(), top), print_stats, as_json)


@app.command()
@weight_options
def explain(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The focal point to explain.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Also save the components as a chart (plot extra): .png, "
            ".jpg, .svg or .pdf (by suffix).",
        ),
    ] = None,
    k: K = SHOWN_RECALL_K,
    *,
    weights: RetrievalOptions,
) -> None:
    """Show the weighted score components of the top memories; -o saves them as a chart."""
    if output is not None:  # a bad suffix, missing folder or missing extra: before any work
        checked_output(output)
    stream = store_of(ctx).open()
    retriever = weights.retriever(stream, k, touch=False)
    rows = retrieve_rows(retriever, query, k, None)
    title = f"{stream.persona}: {query}"
    if output is None:
        console = stdout_console()
        console.print(weighted_table(rows, effective_gains(retriever), title=title))
        console.print(formula(retriever), highlight=False)
        if relevance := relevance_formula(retriever, rows):
            console.print(relevance, highlight=False)
    else:
        save_explain_png(rows, retriever, title, output)
        typer.echo(f"Saved {output}: score components of the top "
                   f"{memories(len(rows))} for {query!r}")
    if window := time_window_line(retriever, query, rows):
        typer.echo(window)
    if not rows:
        counts = retrieval_counts(retriever, query, rows)
        for line in left_out_lines(counts, 0, clock=stream.clock(),
                                   options=weights.filter_options()):
            typer.echo(line)


class Metric(str, Enum):
    """The objectives ``genmem tune`` maximises."""

    recall = "recall"
    ndcg = "ndcg"


class TunedRelevance(str, Enum):
    """The relevance ``genmem tune`` tunes for."""

    dense = "dense"
    hybrid = "hybrid"


@app.command()
@weight_options
def tune(
    ctx: typer.Context,
    examples: Annotated[
        Path,
        typer.Option(
            "--examples",
            help="Labelled questions, JSON Lines: {\"question\": ..., \"relevant\": [node ids], "
            "\"at\": optional time, \"persona\": optional}; other personas' lines are skipped.",
        ),
    ],
    metric: Annotated[
        Metric, typer.Option("--metric", help="Maximise mean recall@k or nDCG@k.")
    ] = Metric.recall,
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="The cut-off of the metric.")] = 10,
    train_fraction: Annotated[
        float,
        typer.Option("--train-fraction", help="Share of the examples to tune on; the rest "
                     "is held out and only reported."),
    ] = 0.7,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split and the search.")] = 0,
    tuned_relevance: Annotated[
        TunedRelevance,
        typer.Option("--tuned-relevance", help="hybrid: also tune the lexical weight of the "
                     "relevance; dense: the original's cosine only. (--relevance and the "
                     "other retrieval options set where the search starts.)"),
    ] = TunedRelevance.hybrid,
    save: Annotated[
        bool, typer.Option("--save", help="Store the tuned values as the persona's settings.")
    ] = False,
    *,
    weights: RetrievalOptions,
    as_json: AsJson = False,
) -> None:
    """Learn the retrieval weights, decay and lexical weight from labelled questions."""
    from langchain_genmem.evaluation.metrics import load_examples  # lazy: start-up time
    from langchain_genmem.evaluation.tuning import fit_weights  # lazy: start-up time

    stream = store_of(ctx).open()
    labelled = persona_examples(load_examples(examples), stream.persona, examples)
    result = fit_weights(
        stream, labelled, metric=metric.value, k=k, train_fraction=train_fraction, seed=seed,
        relevance=tuned_relevance.value, retriever=weights.retriever(stream, k, touch=False),
    )
    if save:
        stream.update_settings(**result.settings())
    show(tune_report(stream.persona, result, saved=save), print_tune_report, as_json)


# How to reflect when the trigger is not due, on the command line.
FORCE_OPTION_HINT = "`genmem reflect --force` reflects now"


class OutputForm(str, Enum):
    """How `genmem reflect` asks the model for its replies."""

    auto = "auto"
    structured = "structured"
    text = "text"


_DEFAULTS = ReflectionSettings()
_DEFAULT_OUTPUT = OutputForm(_DEFAULTS.output)


@app.command()
def reflect(
    ctx: typer.Context,
    force: Annotated[
        bool, typer.Option("--force", help="Reflect even if the importance trigger has not fired.")
    ] = False,
    output: Annotated[
        OutputForm,
        typer.Option(
            "--output",
            help="auto: JSON-schema replies where the server takes them, else text; "
            "structured: always; text: the original's text prompts.",
        ),
    ] = _DEFAULT_OUTPUT,
    max_calls: Annotated[
        int,
        typer.Option("--max-calls", min=1, help="The most model calls of this reflection."),
    ] = _DEFAULTS.max_calls or 1,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0.001, help="Seconds one model call may take."),
    ] = _DEFAULTS.limits.timeout,
) -> None:
    """Run the reflection graph with an OpenAI-compatible chat model (OPENAI_* variables).

    The trigger is checked first: when it is not due, this says why, and no model is needed.

    A reflection that writes nothing prints why, one `reason:` line each.
    """
    from langchain_genmem.llm.chat import (  # lazy: start-up time
        UnconfiguredChatModel,
        chat_model_from_env,
    )
    from langchain_genmem.reflection.graph import create_reflection_graph  # lazy: start-up time

    settings = ReflectionSettings(output=output.value, max_calls=max_calls,
                                  limits=CallLimits(timeout=timeout))
    stream = store_of(ctx).open()
    try:
        model = chat_model_from_env(limits=settings.limits)
    except ConfigurationError as e:  # no model or no extra: said only if the run needs one
        model = UnconfiguredChatModel(hint=" ".join(str(e).split()))
    graph = create_reflection_graph(model, stream, force=force, settings=settings)
    out = graph.invoke({})  # model errors: one line
    typer.echo(f"status: {out['status']}")
    if out["status"] == "not_due":
        trigger = out["trigger"]
        typer.echo("trigger: " + trigger_text(trigger["value"], trigger["threshold"],
                                              due=False, hint=FORCE_OPTION_HINT))
    for node_id in out.get("written", []):
        node = stream.get(node_id)
        typer.echo(f"{node_id}: {node.description}")
        for ev in node.evidence:
            typer.echo(f"    evidence {ev}: {stream.get(ev).description}")
    if out["status"] in ("no_questions", "no_insights"):
        for line in out.get("reasons", []):
            typer.echo(f"reason: {line}")
    typer.echo(f"llm calls: {out.get('llm_calls', 0)}")


@app.command()
def demo(
    folder: Annotated[
        Path | None,
        typer.Argument(
            help="An associative_memory folder (default: the bundled Maria Lopez fixture)."
        ),
    ] = None,
    k: K = CHAT_RECALL_K,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show the embedding progress bar.")
    ] = True,
) -> None:
    """Offline tour: import a persona into a temporary store and show retrieval at work."""
    run_demo(stdout_console(), folder or bundled_fixture(), k=k, progress=progress)


# The option or argument of `genmem add` that gives each field of the memory written.
_ADD_OPTIONS = {
    "type": "kind", "description": "description", "poignancy": "--poignancy",
    "subject": "--subject", "predicate": "--predicate", "object": "--object",
    "keywords": "--keyword", "evidence": "--evidence", "filling": "--line",
    "created": "--created", "expiration": "--expiration", "expires_in": "--expires-in",
    "supersedes": "--supersedes",
}


def _add_item(store: Store, item: dict[str, Any]) -> tuple[MemoryStream, MemoryNode]:
    """Write one memory; a bad value is refused naming its option, before any store is made.

    Args:
        store: where the memories live.
        item: the memory, as :meth:`~langchain_genmem.MemoryStream.add_many` takes it.

    Returns:
        The persona's stream and the node written.

    Raises:
        ValidationError: a bad value (``--poignancy: expected a number from 1 ...``), or
            evidence the stream does not hold (``--evidence: no memory ...``).
    """
    try:
        validate_items([item])
        stream = store.open(create=True)
        return stream, stream.add_many([item])[0]
    except ValidationError as e:
        field = (e.field or "").rpartition(".")[2]  # items[0].evidence -> evidence
        if field not in _ADD_OPTIONS:
            raise
        raise renamed(e, _ADD_OPTIONS[field]) from e


def _chat_line(text: str) -> list[str]:
    for sep in (":", "："):
        speaker, found, utterance = text.partition(sep)
        if found and speaker.strip() and utterance.strip():
            return [speaker.strip(), utterance.strip()]
    msg = f"--line: {text!r} is not 'speaker: utterance'"
    raise ValidationError(msg, field="--line")
