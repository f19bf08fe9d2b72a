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
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

HEAVY = ["chromadb", "langgraph", "langsmith", "langchain_core.language_models", "fastapi"]


def loaded_after(code: str, heavy: Sequence[str] = HEAVY) -> list[str]:
    """The heavy packages (of ``heavy``) a fresh interpreter has loaded after running ``code``."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps([m for m in {list(heavy)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_package_loads_none_of_them() -> None:
    assert loaded_after("import langchain_genmem") == []


def test_a_public_name_loads_what_it_needs_on_first_use() -> None:
    assert loaded_after("from langchain_genmem import ValidationError") == []
    assert "chromadb" not in loaded_after("from langchain_genmem import MemoryStream")
    assert "chromadb" in loaded_after("import langchain_genmem as g; g.MemoryStream('玛丽亚')")
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


# What a command that ranks loads besides Chroma: LangChain's retriever, its runnables'
# tracers and LangSmith (the ranking needs none of them).
RETRIEVER = ["chromadb", "langchain_core.retrievers", "langchain_core.tracers", "langsmith"]


def genmem(*args: str) -> str:
    """A fresh interpreter's ``genmem ARGS`` through the command's entry point, exit caught."""
    return textwrap.dedent(f"""
        import sys
        sys.argv = ["genmem", *{list(args)!r}]
        from langchain_genmem.cli import main
        try:
            main()
        except SystemExit:
            pass
    """)


@pytest.mark.parametrize("args", [
    ["--help"],
    ["search", "--help"],
    ["db", "--help"],
    ["search"],                       # a usage error: the query is missing
    ["--now", "soon", "stats"],       # a bad global option
    ["stats", "--no-such-option"],
])
def test_help_and_usage_errors_load_no_store(args: list[str]) -> None:
    assert loaded_after(genmem(*args), RETRIEVER) == []


def test_a_store_that_does_not_exist_is_refused_without_loading_chroma(tmp_path: Path) -> None:
    code = genmem("--path", str(tmp_path / "没有 store"), "stats")
    assert loaded_after(code, RETRIEVER) == []
    assert not (tmp_path / "没有 store").exists()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with two memories of one persona, one of them in Chinese."""
    from langchain_genmem import MemoryStream

    path = tmp_path_factory.mktemp("startup") / "store"
    stream = MemoryStream("玛丽亚 Maria", path=path)
    stream.add_event("玛丽亚和克劳斯一起吃午饭", subject="玛丽亚", predicate="吃", object="午饭",
                     poignancy=4)
    stream.add_event("Maria is studying physics", subject="Maria", predicate="is studying",
                     object="physics", poignancy=3)
    stream.close()
    return path


@pytest.mark.parametrize("command", [["search", "午饭", "-k", "1"], ["explain", "lunch"]])
def test_ranking_on_a_folder_loads_chroma_but_not_the_retriever_machinery(
    folder: Path, command: list[str]
) -> None:
    assert loaded_after(genmem("--path", str(folder), *command), RETRIEVER) == ["chromadb"]


def test_a_reflection_without_a_chat_model_loads_no_openai_client(folder: Path) -> None:
    # it says in one line that no model is configured: only the variables are needed
    unset = "import os\nfor name in [n for n in os.environ if n.startswith('OPENAI_')]:\n" \
            "    del os.environ[name]\n"
    code = unset + genmem("--path", str(folder), "reflect", "--force")
    assert loaded_after(code, ["langchain_openai", "openai"]) == []


def test_the_command_freezes_the_heap_at_exit_after_its_output(folder: Path) -> None:
    # The interpreter's final collections skip what the command made (a third of a second
    # of a search); the exit hooks still run, and the output is all there.
    code = "import atexit, gc\natexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))"
    done = subprocess.run(
        [sys.executable, "-c", code + genmem("--path", str(folder), "search", "午饭", "-k", "1")],
        capture_output=True, text=True, timeout=120, check=True,
    )
    assert "玛丽亚和克劳斯一起吃午饭" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "frozen True"


def test_access_times_left_to_the_exit_hook_are_stored_with_the_heap_frozen(
    tmp_path: Path,
) -> None:
    # The command's work (here: memories marked accessed, an hour-long flush interval, the
    # stream never closed) returns; only the exit hook can store the access time.
    work = textwrap.dedent(f"""
        import datetime, sys
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_genmem import MemoryStream

        def work():
            stream = MemoryStream("玛丽亚", path={str(tmp_path)!r}, flush_interval=3600,
                                  embeddings=DeterministicFakeEmbedding(size=8))
            stream.add_event("玛丽亚在学习物理", subject="玛丽亚", predicate="学习",
                             object="物理", poignancy=3,
                             created=datetime.datetime(2023, 2, 13, 9, 0))
            stream.mark_accessed(["node_1"], when=datetime.datetime(2023, 2, 14, 18, 30))

        import langchain_genmem.cli
        sys.modules["langchain_genmem.cli.app"].app = work
        sys.modules["langchain_genmem.cli.app"].main()
    """)
    subprocess.run([sys.executable, "-c", work], timeout=120, check=True)
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_genmem import MemoryStream

    stream = MemoryStream("玛丽亚", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8))
    assert str(stream.get("node_1").last_accessed) == "2023-02-14 18:30:00"
    stream.close()
