"""Public names of a package that load their modules on first use (PEP 562).

``import langchain_genmem`` and every ``genmem`` command import a package's ``__init__``
first; when it imports every module it exports, each start-up pays for Chroma, LangGraph
and LangChain's runnables whether the command uses them or not (about a second each). A
package lists its names here instead and keeps the imports under ``TYPE_CHECKING`` for type
checkers and readers::

    __getattr__, __dir__ = lazy_exports(__name__, {
        "langchain_genmem.memory.stream": ["MemoryStream"],
    })

``from langchain_genmem import MemoryStream`` and ``langchain_genmem.MemoryStream`` then
import ``langchain_genmem.memory.stream`` the first time, and the name is kept in the
package from then on.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, modules: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for names imported on first use.

    Args:
        package: the package's ``__name__``.
        modules: each module and the names of it the package exports.

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level.
    """
    home = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's own name
        module = home.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # found directly from now on
        return value

    def __dir__() -> list[str]:  # noqa: N807 - the module hook's own name
        return sorted({*vars(sys.modules[package]), *home})

    return __getattr__, __dir__
