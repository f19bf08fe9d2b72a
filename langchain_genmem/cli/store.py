"""Where a ``genmem`` command's memories live: :class:`Store`, built from the global options."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from langchain_genmem.backends.opener import CHROMA_FILE
from langchain_genmem.cli.options import renamed
from langchain_genmem.core.errors import StorageError, ValidationError
from langchain_genmem.core.timeutil import FixedClock
from langchain_genmem.memory.location import StoreLocation

if TYPE_CHECKING:
    from langchain_genmem.backends.base import MemoryBackend
    from langchain_genmem.memory.stream import MemoryStream

__all__ = ["CHROMA_FILE", "Store", "store_of"]


@dataclass
class Store(StoreLocation):
    """Where the memories live, from the global options.

    A :class:`~langchain_genmem.memory.location.StoreLocation` whose messages name the
    options (``--path``, ``--chroma-host``, ``--persona``...).

    Attributes:
        persona: the persona asked for (``--persona``), or None.
        now: the time asked for (``--now``), or None: streams get a fixed clock at it.
    """

    persona: str | None = None
    now: datetime | None = None

    def __post_init__(self) -> None:
        if self.dsn:
            self.path = None  # --path has a default; with --dsn the memories are not there
        elif self.path is not None:
            self.path = Path(self.path)
        if self.now is not None and self.clock is None:
            self.clock = FixedClock(self.now)

    def backend(self, *, create: bool = True) -> MemoryBackend:
        """The storage backend (opened once), errors naming the options.

        Args:
            create: False refuses a store that does not exist yet.

        Returns:
            The backend.

        Raises:
            ValidationError: a store to read that does not exist, or ``--dsn`` with
                ``--chroma-host``.
            StorageError: the store cannot be opened or the server not reached.
        """
        try:
            return super().backend(create=create)
        except ValidationError as e:
            if e.field == "dsn":
                msg = "--dsn: give either a PostgreSQL --dsn or a Chroma --chroma-host, not both"
                raise ValidationError(msg, field="dsn") from e
            if e.field == "path":  # a file, or a folder that cannot be made
                raise renamed(e, "--path") from e
            option = "--collection" if e.field == "collection" else "--path"
            msg = (
                f"{option}: {e}; check {option} or create it with `genmem import FOLDER` or "
                "`genmem add ...`"
            )
            raise ValidationError(msg, field="path") from e
        except StorageError as e:
            if self.host:
                msg = f"{e}, or drop --chroma-host"
                raise StorageError(msg) from e
            raise

    def open(
        self, persona: str | None = None, *, create: bool = False, **stream_kwargs: object
    ) -> MemoryStream:
        """The persona's stream, its clock set (``--now``, else the saved simulation time).

        Args:
            persona: the persona; None for ``--persona``, else the store's only one.
            create: the caller writes (``add``, the service's writes): the store and the
                persona may be new. Otherwise both must exist, so a read never leaves an
                empty store behind.
            **stream_kwargs: more :class:`MemoryStream` arguments.

        Returns:
            The stream.

        Raises:
            ValidationError: the store or the persona does not exist (for a read), or no
                persona was named and the store does not hold exactly one.
        """
        personas = self.backend(create=create).personas()
        persona = persona or self.persona or self._only_persona(personas)
        if not create and persona not in personas:
            msg = (
                f"--persona: no persona {persona!r} in {self.where()}; it holds "
                f"{', '.join(personas)}"
            )
            raise ValidationError(msg, field="persona")
        return super().open(persona, create=True, **stream_kwargs)

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


def store_of(ctx: typer.Context) -> Store:
    """The :class:`Store` the global options made for this command.

    Args:
        ctx: the command's context.

    Returns:
        The store.
    """
    return ctx.ensure_object(Store)
