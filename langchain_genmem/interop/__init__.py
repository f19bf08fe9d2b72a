"""Interop with other memory formats: today the original Generative Agents simulation's.

See :mod:`langchain_genmem.interop.generative_agents`.
"""

from langchain_genmem.interop.generative_agents import (
    FixedClock,
    SavedMemory,
    dump_associative_memory,
    find_personas,
    import_storage,
    load_associative_memory,
    persona_of,
    read_associative_memory,
    scratch_time,
)

__all__ = [
    "FixedClock",
    "SavedMemory",
    "dump_associative_memory",
    "find_personas",
    "import_storage",
    "load_associative_memory",
    "persona_of",
    "read_associative_memory",
    "scratch_time",
]
