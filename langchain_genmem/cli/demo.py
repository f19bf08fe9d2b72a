"""The ``genmem demo`` tour: import a persona offline and show retrieval, keywords and stats."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_genmem.cli.options import TIME_FORMAT, RetrievalOptions
from langchain_genmem.cli.render import (
    formula,
    memories,
    plural,
    print_keyword_report,
    print_stats,
    score_table,
)
from langchain_genmem.cli.reports import keyword_report, retrieve_rows, stream_stats
from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.timeutil import FixedClock
from langchain_genmem.interop.generative_agents import (
    NODES_FILE,
    load_associative_memory,
    persona_of,
)

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_FIXTURE = Path(
    "data/generative_agents/July1_the_ville_isabella_maria_klaus-step-3-12/personas/"
    "Maria Lopez/bootstrap_memory/associative_memory"
)


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
    texts = len(stream.embeddings_by_key())
    say("1. Import", f"{persona}: {memories(len(stream))} re-embedded in {imported:.1f} s; "
        f"clock = saved curr_time {then:{TIME_FORMAT}}")
    console.print(f"   {plural(texts, 'distinct text')} embedded: memories with the same "
                  "embedding_key share one vector", highlight=False)
    focal = "breakfast and morning routine"
    sections = [
        ("2. Relevance", f"{focal!r}, weights 0/1/0: meaning alone ranks",
         RetrievalOptions(recency_w=0, importance_w=0)),
        ("3. Importance", "same focal point, the paper's weights 1/1/1: poignant memories climb",
         RetrievalOptions()),
        ("4. Recency", "recency weight 6 (times its gain 0.5: 3×recency): this afternoon's "
         "memories come first", RetrievalOptions(recency_w=6)),
    ]
    for name, why, weights in sections:
        say(name, why)
        retriever = weights.retriever(stream, k, touch=False)
        rows = retrieve_rows(retriever, focal, k, None)
        console.print(score_table(rows, title=None, width=console.width))
        console.print(f"   {formula(retriever)}", highlight=False)
    retrieve_rows(RetrievalOptions().retriever(stream, 3, touch=True), focal, 3, None)
    later = then + timedelta(hours=3)
    stream.clock = FixedClock(later)
    say("5. Recall", f"section 3's top 3 retrieved at {then:%H:%M} (last_accessed := now): "
        f"at {later:%H:%M} section 4's query ranks them first")
    rows = retrieve_rows(sections[-1][2].retriever(stream, k, touch=False), focal, k, None)
    console.print(score_table(rows, title=None, width=console.width))
    newest = stream.nodes("event")[0]
    say("6. Keywords", f"the original's retrieve() for the newest event {newest.description!r}")
    print_keyword_report(console, keyword_report(stream, newest.spo, 3))
    say("7. Stats", "counts, depths, reflection trigger, settings, keyword strengths")
    print_stats(console, stream_stats(stream, 5))
    console.print(f"\nDone in {time.perf_counter() - started:.1f} s "
                  f"(import {imported:.1f} s).", highlight=False)


def bundled_fixture() -> Path:
    """The bundled Maria Lopez fixture, in the working folder or in the package's checkout.

    Returns:
        Its ``associative_memory`` folder.

    Raises:
        ValidationError: neither place holds it.
    """
    here = Path(__file__).resolve().parents[2]  # cli/demo.py -> the checkout
    for base in (Path.cwd(), here):
        if (base / DEFAULT_FIXTURE / NODES_FILE).exists():
            return base / DEFAULT_FIXTURE
    msg = f"no folder given and the bundled fixture {DEFAULT_FIXTURE} is not here; pass one"
    raise ValidationError(msg, field="folder")


def _sayer(console: Console) -> Callable[[str, str], None]:
    from rich.markup import escape

    def say(head: str, text: str) -> None:
        console.print(f"\n[bold]{head}[/bold]  {escape(text)}", highlight=False)

    return say
