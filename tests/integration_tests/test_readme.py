"""Every python block of README.md runs as printed, and prints what the README shows under it.

The blocks are found, not listed: add a block to the README and it is run here. The rules:

- Blocks run in README order, each in its own ``python`` process, all in one temporary
  folder holding ``data/`` (a link to the repository's), as a reader following the tour from
  a clone would. A block may reopen what an earlier block stored (``.genmem``...).
- Every block gets ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` of a scripted OpenAI-compatible
  server (``tests/support/openai_server.py``) answering with :data:`README_RULES`; a prompt no
  rule matches gets :data:`DEFAULT_REPLY`. Add a rule there when a new block needs a reply
  of its own.
- A fenced ``text`` block right after a python block (nothing but blank lines between) is
  the output the block must print, compared exactly (trailing spaces and blank lines aside).
- An HTML comment just above the block (``<!-- readme-test: WORDS -->``) declares more:
  ``rerun`` runs the block twice; both runs must print the same (nothing stored twice).
  ``needs=chroma`` starts the Chroma server of ``tests/support/chroma_server.py`` and passes
  its address as ``CHROMA_HOST`` and ``CHROMA_PORT``; ``needs=postgres`` creates an empty
  database with pgvector on the session's PostgreSQL (``tests/support/postgres_server.py``)
  and passes its DSN as ``GENMEM_DSN``. Any other word fails the test, so a typo cannot
  switch a check off.

The examples' docstrings are held to the same standard: every ``python examples/...`` usage
line runs as printed (optional ``[...]`` parts left out) in a temporary folder holding
``examples/``, ``data/`` and a ``turns.txt`` of two messages, with the scripted server behind
``OPENAI_*``; it must exit 0, print no traceback and leave nothing in the temporary folder.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DEFAULT_REPLY = "Nice to meet you! I will remember that."
README_RULES = [
    # section 1: the chain's answer
    {"when": r"Who invited you to a party\?",
     "reply": "Klaus Mueller did: he asked me to the Valentine's Day party."},
    # importance of one memory, and of several in one call
    {"when": r"following event for Isabella.*Event: [^\n]*(Valentine|party)", "reply": "8"},
    {"when": r"following event for", "reply": "3"},
    {"when": r"rate the likely poignancy of each of the following", "reply": "1. 7\n2. 6\n3. 5"},
    # reflection: questions, insights with cited evidence, triples
    {"when": r"most salient high-level questions",
     "reply": "1) How does Isabella Rodriguez feel about the Valentine's Day party?\n"
              "2) What does Hobbs Cafe mean to Isabella Rodriguez?"},
    {"when": r"high-level insights can you infer",
     "reply": "1. Isabella Rodriguez is excited about the Valentine's Day party (because of 0, 1)\n"
              "2. Isabella Rodriguez is busy getting Hobbs Cafe ready for the party "
              "(because of 1, 2, 99)"},
    {"when": r"\(subject, predicate, object\) triple",
     "reply": "1. (Isabella Rodriguez, be excited about, Valentine's Day party)\n"
              "2. (Isabella Rodriguez, get ready, Hobbs Cafe)"},
]
MARKER = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->", re.DOTALL)
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
WORDS = re.compile(r"rerun|needs=chroma|needs=postgres")
TIMEOUT = 600


@dataclass
class Block:
    """One python block of the README: where it is, its code, what it declares and shows."""

    line: int
    code: str
    declared: list[str] = field(default_factory=list)
    shown: str | None = None

    @property
    def name(self) -> str:
        return f"README.md:{self.line}"


def readme_blocks(text: str) -> list[Block]:
    """The python blocks of a markdown text, with the comment above and the output below."""
    fences = list(FENCE.finditer(text))
    blocks = []
    for i, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        before = text[: fence.start()].rstrip()
        markers = list(MARKER.finditer(before))
        marker = markers[-1] if markers and markers[-1].end() == len(before) else None
        declared = marker.group(1).split("(")[0].split() if marker else []
        block = Block(text.count("\n", 0, fence.start()) + 1, fence.group(2), declared)
        after = fences[i + 1] if i + 1 < len(fences) else None
        if after is not None and after.group(1) in ("text", "") \
                and not text[fence.end(): after.start()].strip():
            block.shown = after.group(2)
        blocks.append(block)
    return blocks


BLOCKS = readme_blocks(README.read_text("utf-8"))


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def offline_env(**extra: str) -> dict[str, str]:
    outer = ("OPENAI_", "CHROMA_", "GENMEM_")  # the reader's own settings never leak in
    keep = {k: v for k, v in os.environ.items() if not k.startswith(outer)}
    return {**keep, **extra}


@pytest.fixture(scope="module")
def openai_env(tmp_path_factory: pytest.TempPathFactory):
    from tests.support.openai_server import ScriptedOpenAI

    folder = tmp_path_factory.mktemp("readme-openai")
    with ScriptedOpenAI(README_RULES, default=DEFAULT_REPLY, tmp_path=folder) as srv:
        yield srv.env()


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The reader's folder (a clone's data/ in it) and the output of the blocks run so far."""
    folder = tmp_path_factory.mktemp("readme-tour")
    (folder / "data").symlink_to(ROOT / "data", target_is_directory=True)
    return {"folder": folder, "ran": {}}


def run_block(block: Block, folder: Path, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", block.code], cwd=folder, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=TIMEOUT,
                          check=False)
    assert done.returncode == 0, f"{block.name} failed:\n{done.stderr[-4000:]}"
    return done.stdout


def test_the_readme_has_python_blocks_and_each_declares_only_known_words() -> None:
    assert len(BLOCKS) >= 6
    for block in BLOCKS:
        unknown = [w for w in block.declared if not WORDS.fullmatch(w)]
        assert not unknown, f"{block.name}: unknown readme-test words {unknown}"


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[b.name for b in BLOCKS])
def test_readme_block_runs_as_printed(index: int, tour: dict, openai_env: dict,
                                      request: pytest.FixtureRequest) -> None:
    for i in range(index + 1):  # earlier blocks first, even when this one is run alone
        if i in tour["ran"]:
            continue
        block = BLOCKS[i]
        env = offline_env(**openai_env)
        if "needs=chroma" in block.declared:
            server = request.getfixturevalue("chroma_server")
            env |= {"CHROMA_HOST": server.host, "CHROMA_PORT": str(server.port)}
        if "needs=postgres" in block.declared:
            server = request.getfixturevalue("postgres_server")
            env["GENMEM_DSN"] = server.create_database(f"readme_{block.line}")
        out = run_block(block, tour["folder"], env)
        if "rerun" in block.declared:
            again = run_block(block, tour["folder"], env)
            assert lines(again) == lines(out), f"{block.name}: a second run printed otherwise"
        tour["ran"][i] = out
    block = BLOCKS[index]
    if block.shown is not None:
        assert lines(tour["ran"][index]) == lines(block.shown), block.name


def test_the_quickstart_says_when_to_batch_adds() -> None:
    text = README.read_text("utf-8")
    quickstart = text[text.index("### 1. Quickstart"): text.index("### 2. ")]
    assert "stream.add_many(" in quickstart and "one store commit" in quickstart


# ---------------------------------------------------------------------------- examples


def usage_lines(path: Path) -> list[str]:
    """The ``python examples/...`` lines of a script's docstring, comments and [...] dropped."""
    doc = re.search(r'^"""(.*?)"""', path.read_text("utf-8"), re.DOTALL)
    assert doc, f"{path.name} has no docstring"
    found = []
    for line in doc.group(1).splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("python examples/"):
            found.append(" ".join(re.sub(r"\[[^\]]*\]", " ", line).split()))
    return found


USAGE = [(p.name, line) for p in sorted((ROOT / "examples").glob("*.py"))
         for line in usage_lines(p)]


def test_every_example_shows_its_usage() -> None:
    named = {name for name, _ in USAGE}
    assert named == {p.name for p in (ROOT / "examples").glob("*.py")}


@pytest.mark.parametrize(("example", "line"), USAGE, ids=[line for _, line in USAGE])
def test_example_usage_runs_as_printed(example: str, line: str, tmp_path: Path,
                                       openai_env: dict) -> None:
    folder, temp = tmp_path / "clone", tmp_path / "tmp"
    folder.mkdir()
    temp.mkdir()
    for name in ("examples", "data"):
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    (folder / "turns.txt").write_text("My name is Sam.\n我妹妹住在波尔图。\n", "utf-8")
    argv = shlex.split(line)
    done = subprocess.run([sys.executable, *argv[1:]], cwd=folder, input="",
                          env=offline_env(**openai_env, TMPDIR=str(temp)), capture_output=True,
                          text=True, encoding="utf-8", timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr
    assert list(temp.iterdir()) == [], "the example left files in the temporary folder"
