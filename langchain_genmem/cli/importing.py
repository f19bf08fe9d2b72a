"""What ``genmem import`` reads, and under which names: :func:`import_folder`.

A folder may be one persona's (its ``associative_memory`` folder, the persona's own folder
or its ``bootstrap_memory``) or a whole simulation's. ``--persona NAME`` picks a persona of
a simulation, or names the persona whose folder is given: it is imported under that name,
so a persona already in the store can be imported again beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.interop.generative_agents import (
    NODES_FILE,
    find_personas,
    import_storage,
    load_associative_memory,
    persona_of,
)

if TYPE_CHECKING:
    from langchain_genmem.cli.store import Store
    from langchain_genmem.memory.stream import MemoryStream

# Where a persona's folder keeps its memories, from the folder given.
_INNER = (Path("."), Path("associative_memory"), Path("bootstrap_memory", "associative_memory"))


def import_folder(store: Store, folder: Path, **options: Any) -> dict[str, MemoryStream]:
    """Import a persona's or a simulation's saved memories into the store.

    Args:
        store: the store (its ``persona`` is ``--persona``).
        folder: the folder given.
        **options: ``reembed`` and ``progress``, as the importers take them.

    Returns:
        ``{persona name: stream}``.

    Raises:
        ValidationError: the persona cannot be told, a simulation does not hold the persona
            named, or a persona already has memories in the store (the messages say how to
            import a persona's folder under another name).
    """
    one = _persona_folder(folder)
    if one is None:
        found = find_personas(folder)
        if store.persona is None or store.persona in found:
            names = list(found) if store.persona is None else [store.persona]
            _refuse_present(store, {n: found[n] for n in names})
            wanted = None if store.persona is None else names
            return import_storage(folder, personas=wanted, **options, **store.stream_kwargs())
        _refuse_missing(found, store.persona, folder)
    name = store.persona or persona_of(one)
    if name is None:
        msg = f"cannot tell the persona from {folder}; give --persona NAME"
        raise ValidationError(msg, field="persona")
    _refuse_present(store, {name: one})
    stream = load_associative_memory(one, persona=name, **options, **store.stream_kwargs())
    return {name: stream}


def _persona_folder(folder: Path) -> Path | None:
    """The ``associative_memory`` folder of a persona's folder, or None for a simulation."""
    for inner in _INNER:
        if (folder / inner / NODES_FILE).is_file():
            return folder / inner
    return None


def _refuse_missing(found: dict[str, Path], name: str, folder: Path) -> NoReturn:
    """A persona the simulation does not hold: say how to import one of its own under it."""
    first = next(iter(found.values())).parent.parent
    msg = (
        f"--persona: no persona {name!r} in {folder} (it holds {', '.join(found)}); to import "
        f"one of them as {name!r}, give its folder: genmem --persona {name!r} import '{first}'"
    )
    raise ValidationError(msg, field="persona")


def _refuse_present(store: Store, personas: dict[str, Path]) -> None:
    """Refuse, before anything is read, personas that already have memories in the store."""
    present = set(store.backend().personas())
    for name, folder in personas.items():
        if name in present:
            own = folder.parent.parent if folder.parent.name == "bootstrap_memory" else folder
            count = len(store.open(name))
            msg = (
                f"persona {name!r} already has {count} memories in {store.where()}; import into "
                "another --path or --collection, or under another name: genmem --persona "
                f"NAME import '{own}'"
            )
            raise ValidationError(msg, field="persona")
