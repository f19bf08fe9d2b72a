"""``python -m langchain_genmem.cli``: the ``genmem`` command."""

from __future__ import annotations

from langchain_genmem.cli import main

main()
