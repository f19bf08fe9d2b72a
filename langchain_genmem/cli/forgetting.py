"""What ``genmem forget`` asks and says: the confirmation of ``--all`` and the report's lines."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, TextIO

import typer

from langchain_genmem.cli.render import memories
from langchain_genmem.core.errors import ValidationError

if TYPE_CHECKING:
    from langchain_genmem.core.nodes import MemoryNode
    from langchain_genmem.memory.forgetting import ForgetReport

YES = ("y", "yes")


def confirm_all(persona: str, count: int, answers: TextIO | None = None) -> None:
    """Ask on stderr whether every memory of the persona may go; read the answer from stdin.

    Args:
        persona: the persona.
        count: how many memories it holds.
        answers: where the answer is read (default: stdin).

    Raises:
        ValidationError: no answer (stdin empty or closed) or not yes: nothing is forgotten.
    """
    typer.echo(f"Forget all {memories(count)} of {persona} for good? [y/N] ", err=True,
               nl=False)
    answer = (answers or sys.stdin).readline()
    if not answer:
        typer.echo("", err=True)  # the prompt's line ends: the error is a line of its own
        msg = (f"--all: no answer on stdin; nothing was forgotten (add --yes to forget every "
               f"memory of {persona} without asking)")
        raise ValidationError(msg, field="--all")
    if answer.strip().casefold() not in YES:
        raise ValidationError(f"--all: not confirmed ({answer.strip()!r}); nothing was forgotten",
                              field="--all")


def report_lines(report: ForgetReport, shown: Mapping[str, MemoryNode]) -> list[str]:
    """The report in words: what went (or would go), what was kept, what is left.

    Args:
        report: what the forget did.
        shown: the memories described, by id (a dry run's, read before: they still exist).

    Returns:
        The lines.
    """
    if not report.forgotten:
        return [f"Nothing to forget: no memory of {report.persona} matches."]
    head = "Would forget" if report.dry_run else "Forgot"
    left = "would be left" if report.dry_run else "left"
    lines = [f"{head} {memories(len(report))} of {report.persona} "
             f"({report.live_count} {left}):"]
    derived = set(report.derived)
    for node_id in report.forgotten:
        node = shown.get(node_id)
        text = f"  {node_id}"
        if node is not None:
            text += f"  {node.type:<7}  {node.description}"
        if node_id in derived:
            text += "  (cites forgotten evidence)"
        lines.append(text)
    if report.kept:
        verb = "would lose" if report.dry_run else "lost"
        lines.append(f"Kept {', '.join(report.kept)}: their evidence {verb} the forgotten ids.")
    if report.rekeyed:
        verb = "would be" if report.dry_run else "were"
        lines.append(f"Re-keyed {', '.join(report.rekeyed)}: turns that quoted a forgotten turn "
                     f"{verb} embedded again without it.")
    if report.dry_run:
        lines.append("Nothing was forgotten (--dry-run).")
    if report.erased is False:
        lines.append(f"Not erased from the folder's files: {report.erasure}.")
    return lines
