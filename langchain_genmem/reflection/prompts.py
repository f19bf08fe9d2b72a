"""Importable here as before; the module is :mod:`langchain_genmem.llm.prompts`."""

from langchain_genmem.llm import prompts as _prompts
from langchain_genmem.llm.prompts import *  # noqa: F403 - its names, as before, listed once

__all__ = _prompts.__all__
