"""What starting up imports: only what is used.

Every ``genmem`` command, ``--help`` included, starts by importing the package and the CLI;
a program that imports ``langchain_genmem`` for one class should not pay for the others.
Chroma, LangGraph, LangChain's runnables (with LangSmith's tracers) and the web framework cost
about a second of start-up each, so each is loaded by the modules that use it, when they are
first used. These run in fresh interpreters: this one has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ["chromadb", "langgraph", "langsmith", "langchain_core.language_models", "fastapi"]


def loaded_after(code: str) -> list[str]:
    """The heavy packages a fresh interpreter has loaded after running ``code``."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_package_loads_none_of_them() -> None:
    assert loaded_after("import langchain_genmem") == []


def test_a_public_name_loads_what_it_needs_on_first_use() -> None:
    assert loaded_after("from langchain_genmem import ValidationError") == []
    assert "chromadb" in loaded_after("from langchain_genmem import MemoryStream")
    assert "langgraph" in loaded_after("import langchain_genmem as g; g.create_reflection_graph")


def test_the_command_line_loads_neither_langgraph_nor_langsmith_nor_the_web_framework() -> None:
    # (LangChain's Embeddings, which every store needs, loads part of its chat models.)
    loaded = loaded_after("from langchain_genmem.cli import app")
    assert not {"langgraph", "langsmith", "fastapi"} & set(loaded)


def test_every_public_name_is_still_there_and_listed() -> None:
    import langchain_genmem
    from langchain_genmem import reflection, service

    for package in (langchain_genmem, reflection, service):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
            assert name in dir(package)


@pytest.mark.parametrize("name", ["NoSuchThing", "memory_stream"])
def test_an_unknown_name_is_an_attribute_error_naming_it(name: str) -> None:
    import langchain_genmem

    with pytest.raises(AttributeError, match=f"has no attribute '{name}'"):
        getattr(langchain_genmem, name)
