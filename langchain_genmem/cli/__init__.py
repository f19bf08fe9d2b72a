"""The ``genmem`` command line: a thin shell over the library.

Every command works on one persona's memory stream in an embedded Chroma folder (``--path``,
default ``./.genmem``), on a Chroma server (``--chroma-host``/``--chroma-port``) or in a
PostgreSQL + pgvector database (``--dsn`` or ``GENMEM_DSN``; ``genmem db init --print``
shows the schema). Errors of
the library are printed as one line saying what to do, with exit code 2 for bad input or
missing setup and 1 for anything else; a usage error (an unknown option, a missing value)
is one line too, exit code 2. ``genmem demo`` runs offline on the bundled fixture.

The package holds ``app`` (the typer app, global options, errors as hints), ``usage``
(click's usage errors as one line), ``options`` (option aliases, :class:`RetrievalOptions`,
times), ``store`` (:class:`Store`), ``importing`` (what ``import`` reads), ``commands``,
``reports`` (results as data), ``render`` (results as text, JSON and tables), ``chart``
(the ``explain`` chart) and ``demo`` (the offline tour). Option values follow the library's
rules (:mod:`langchain_genmem.core.validation`); only ``import`` and ``add`` create a store or a
persona.
``serving`` holds ``serve``, ``mcp`` and ``openapi``, which serve every persona of the store
(:mod:`langchain_genmem.service`).

Example:
    .. code-block:: console

        $ genmem import "storage/sim/personas/Maria Lopez/bootstrap_memory/associative_memory"
        $ genmem search "Klaus Mueller's research paper" -k 5
        $ genmem --now "2023-02-13 18:00:00" search "breakfast" --recency-w 6 --json
        $ genmem explain "早餐" -o explain.png
"""

from __future__ import annotations

from langchain_genmem.cli import (
    commands,  # noqa: F401 - registers the commands on app
    db,  # noqa: F401 - registers `genmem db`
    serving,  # noqa: F401 - registers serve, mcp, openapi
)
from langchain_genmem.cli.app import DEFAULT_PATH, app, main
from langchain_genmem.cli.chart import save_explain_png
from langchain_genmem.cli.demo import DEFAULT_FIXTURE, run_demo
from langchain_genmem.cli.options import (
    NodeKind,
    RecencyMode,
    RetrievalOptions,
    Weights,
    parse_time,
)
from langchain_genmem.cli.render import (
    formula,
    print_keyword_report,
    print_stats,
    score_table,
)
from langchain_genmem.cli.reports import (
    COMPONENTS,
    effective_gains,
    keyword_report,
    retrieve_rows,
    stream_stats,
)
from langchain_genmem.cli.store import Store

__all__ = [
    "COMPONENTS",
    "DEFAULT_FIXTURE",
    "DEFAULT_PATH",
    "NodeKind",
    "RecencyMode",
    "RetrievalOptions",
    "Store",
    "Weights",
    "app",
    "effective_gains",
    "formula",
    "keyword_report",
    "main",
    "parse_time",
    "print_keyword_report",
    "print_stats",
    "retrieve_rows",
    "run_demo",
    "save_explain_png",
    "score_table",
    "stream_stats",
]
