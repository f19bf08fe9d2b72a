"""Optional extras: import them when needed, or say which extra to install."""

from __future__ import annotations

import importlib
from typing import Any

from langchain_genmem.core.errors import ConfigurationError


def require_extra(module: str, extra: str, purpose: str) -> Any:
    """Import a module of an optional extra, or say how to install the extra.

    Args:
        module: the module to import (``"pandas"``, ``"matplotlib"``).
        extra: the package extra that provides it (``"pandas"``, ``"plot"``).
        purpose: what needs it, for the message.

    Returns:
        The module.

    Raises:
        ConfigurationError: the module is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        msg = f"{purpose} needs {module}: pip install 'langchain-genmem[{extra}]'"
        raise ConfigurationError(msg) from e
