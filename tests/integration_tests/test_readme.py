"""Every python block of README.md and docs/*.md runs as printed, and prints what the page shows.

The blocks are found, not listed: add a block to a page and it is run here. The rules:

- Each page is a tour of its own: its blocks run in page order, each in its own ``python``
  process, all in one temporary folder for that page holding ``data/`` (a link to the
  repository's), as a reader following the page from a clone would. A block may reopen what an
  earlier block of the same page stored (``.genmem``...); pages never share a folder.
- Every block gets ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` of a scripted OpenAI-compatible
  server (``tests/support/openai_server.py``) answering with :data:`README_RULES`; a prompt no
  rule matches gets :data:`DEFAULT_REPLY`. Add a rule there when a new block needs a reply
  of its own.
- A fenced ``text`` block right after a python block (nothing but blank lines between) is
  the output the block must print, compared line by line (trailing spaces and blank lines
  aside): exactly, unless the block declares a tolerance.
- An HTML comment just above the block (``<!-- readme-test: WORDS -->``) declares more:
  ``rerun`` runs the block twice; both runs must print the same (nothing stored twice).
  ``needs=chroma`` starts the Chroma server of ``tests/support/chroma_server.py`` and passes
  its address as ``CHROMA_HOST`` and ``CHROMA_PORT``; ``needs=postgres`` creates an empty
  database with pgvector on the session's PostgreSQL (``tests/support/postgres_server.py``)
  and passes its DSN as ``GENMEM_DSN``. ``tolerance=0.02`` compares the output token by
  token: every number within 0.02 of the one shown, all text exactly. Any other word fails
  the test, so a typo cannot switch a check off.
- A block leaves nothing in the temporary folder (``TMPDIR``): what a reader copies must
  clean up after itself.

Printed numbers that come from embeddings (cosines, and the scores and normalised parts made
of them) differ slightly between CPUs: the bundled model's vectors differ in about the third
decimal, so such a figure may move by about 0.01 in the second decimal. A block prints them
rounded and declares a tolerance, or prints only what is stable (a ranking with a clear
margin, a count, whether a figure improved). ``GENMEM_TEST_*`` variables reach the blocks, so
a run that perturbs the model's vectors to play another CPU perturbs them here too.

The examples' docstrings are held to the same standard: every ``python examples/...`` usage
line runs as printed (optional ``[...]`` parts left out) in a temporary folder holding
``examples/``, ``data/`` and a ``turns.txt`` of two messages, with the scripted server behind
``OPENAI_*``; it must exit 0, print no traceback and leave nothing in the temporary folder.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEFAULT_REPLY = "Nice to meet you! I will remember that."
README_RULES = [
    # the tour's chain: its answer
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
WORDS = re.compile(r"rerun|needs=chroma|needs=postgres|tolerance=\d+(\.\d+)?([eE]-?\d+)?")
NUMBER = re.compile(r"(-?\d+(?:\.\d+)?)")
TIMEOUT = 600


@dataclass
class Block:
    """One python block of a page: where it is, its code, what it declares and shows."""

    page: str
    line: int
    code: str
    declared: list[str] = field(default_factory=list)
    shown: str | None = None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def tolerance(self) -> float:
        """The declared numeric tolerance, 0 (exact) when none is declared."""
        found = [w.split("=", 1)[1] for w in self.declared if w.startswith("tolerance=")]
        return float(found[-1]) if found else 0.0


def page_blocks(text: str, page: str = "README.md") -> list[Block]:
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
        block = Block(page, text.count("\n", 0, fence.start()) + 1, fence.group(2), declared)
        after = fences[i + 1] if i + 1 < len(fences) else None
        if after is not None and after.group(1) in ("text", "") \
                and not text[fence.end(): after.start()].strip():
            block.shown = after.group(2)
        blocks.append(block)
    return blocks


BLOCKS = [block for path in PAGES
          for block in page_blocks(path.read_text("utf-8"), path.relative_to(ROOT).as_posix())]


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def same_line(printed: str, shown: str, tolerance: float) -> bool:
    """Whether a printed line matches the shown one: text exactly, numbers within tolerance."""
    if tolerance == 0:
        return printed == shown
    got, want = NUMBER.split(printed), NUMBER.split(shown)
    if len(got) != len(want):
        return False
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        if i % 2 == 0:  # text between numbers
            if a != b:
                return False
        elif not math.isclose(float(a), float(b), rel_tol=0, abs_tol=tolerance + 1e-9):
            return False
    return True


def differences(printed: str, shown: str, tolerance: float = 0.0) -> list[str]:
    """The lines where the printed output departs from the shown one (empty: it matches)."""
    got, want = lines(printed), lines(shown)
    found = [f"line {i + 1}: printed {a!r}, shown {b!r}"
             for i, (a, b) in enumerate(zip(got, want, strict=False))
             if not same_line(a, b, tolerance)]
    if len(got) != len(want):
        found.append(f"printed {len(got)} lines, shown {len(want)}")
    return found


def offline_env(**extra: str) -> dict[str, str]:
    """The environment of a block: the reader's own settings never leak in, test switches do."""
    outer = ("OPENAI_", "CHROMA_", "GENMEM_")
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(outer) or k.startswith("GENMEM_TEST_")}
    return {**keep, **extra}


@pytest.fixture(scope="module")
def openai_env(tmp_path_factory: pytest.TempPathFactory):
    from tests.support.openai_server import ScriptedOpenAI

    folder = tmp_path_factory.mktemp("readme-openai")
    with ScriptedOpenAI(README_RULES, default=DEFAULT_REPLY, tmp_path=folder) as srv:
        yield srv.env()


@pytest.fixture(scope="module")
def tours(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Per page: the reader's folder (a clone's data/ in it) and the blocks' output so far."""
    made: dict[str, dict] = {}

    def tour(page: str) -> dict:
        if page not in made:
            folder = tmp_path_factory.mktemp("tour-" + re.sub(r"\W+", "-", page))
            (folder / "data").symlink_to(ROOT / "data", target_is_directory=True)
            (folder.parent / f"{folder.name}-tmp").mkdir()
            made[page] = {"folder": folder, "tmp": folder.parent / f"{folder.name}-tmp",
                          "ran": {}}
        return made[page]

    return {"tour": tour}


def run_block(block: Block, folder: Path, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", block.code], cwd=folder, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=TIMEOUT,
                          check=False)
    assert done.returncode == 0, f"{block.name} failed:\n{done.stderr[-4000:]}"
    return done.stdout


def test_every_page_with_code_has_blocks_and_each_declares_only_known_words() -> None:
    pages = {block.page for block in BLOCKS}
    assert "README.md" in pages and len(pages) >= 8
    for block in BLOCKS:
        unknown = [w for w in block.declared if not WORDS.fullmatch(w)]
        assert not unknown, f"{block.name}: unknown readme-test words {unknown}"
        if block.tolerance:
            assert block.shown is not None, f"{block.name}: a tolerance but no output shown"


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[b.name for b in BLOCKS])
def test_block_runs_as_printed(index: int, tours: dict, openai_env: dict,
                               request: pytest.FixtureRequest) -> None:
    block = BLOCKS[index]
    tour = tours["tour"](block.page)
    for i, earlier in enumerate(BLOCKS[: index + 1]):  # the page's earlier blocks first
        if earlier.page != block.page or i in tour["ran"]:
            continue
        env = offline_env(**openai_env, TMPDIR=str(tour["tmp"]))
        if "needs=chroma" in earlier.declared:
            server = request.getfixturevalue("chroma_server")
            env |= {"CHROMA_HOST": server.host, "CHROMA_PORT": str(server.port)}
        if "needs=postgres" in earlier.declared:
            server = request.getfixturevalue("postgres_server")
            name = re.sub(r"\W+", "_", f"doc_{earlier.page}_{earlier.line}").lower()
            env["GENMEM_DSN"] = server.create_database(name)
        out = run_block(earlier, tour["folder"], env)
        if "rerun" in earlier.declared:
            again = run_block(earlier, tour["folder"], env)
            assert lines(again) == lines(out), f"{earlier.name}: a second run printed otherwise"
        assert list(tour["tmp"].iterdir()) == [], \
            f"{earlier.name} left files in the temporary folder"
        tour["ran"][i] = out
    if block.shown is not None:
        wrong = differences(tour["ran"][index], block.shown, block.tolerance)
        assert not wrong, f"{block.name} printed otherwise:\n" + "\n".join(wrong)


# ------------------------------------------------------------- the comparison itself


def test_text_compares_exactly_and_numbers_within_the_declared_tolerance() -> None:
    shown = "food 1.445 食物\nparty 5.0"
    assert differences("food 1.441 食物\nparty 5.0", shown, 0.02) == []
    assert differences("food 1.441 食物\nparty 5.0", shown) != []  # no tolerance: exact
    assert differences("food 1.475 食物\nparty 5.0", shown, 0.02) != []
    assert differences("fool 1.445 食物\nparty 5.0", shown, 0.02) != []
    assert differences("food 1.445 食物\nparty 5.0\nextra", shown, 0.02) != []
    assert differences("food 1.445 食物 2\nparty 5.0", shown, 0.02) != []
    # integers are numbers too: a node id or a count differs by at least 1
    assert differences("node_38", "node_37", 0.02) != []


def test_a_marker_declares_words_and_a_text_block_below_is_the_output() -> None:
    text = ("<!-- readme-test: rerun tolerance=0.02 (why) -->\n```python\nprint(1)\n```\n\n"
            "```text\n1\n```\n\n```python\nprint(2)\n```\nprose\n```text\n2\n```\n")
    first, second = page_blocks(text, "docs/x.md")
    assert (first.declared, first.tolerance, first.shown) == (["rerun", "tolerance=0.02"],
                                                             0.02, "1\n")
    assert (second.declared, second.tolerance, second.shown) == ([], 0.0, None)
    assert first.name == "docs/x.md:2"


def test_test_switches_reach_the_blocks_and_the_readers_settings_do_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GENMEM_TEST_EMBEDDING_NOISE", "2e-3")
    monkeypatch.setenv("GENMEM_DSN", "postgresql://someone@elsewhere/db")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-readers-own")
    env = offline_env(OPENAI_API_KEY="scripted")
    assert env["GENMEM_TEST_EMBEDDING_NOISE"] == "2e-3"
    assert "GENMEM_DSN" not in env and env["OPENAI_API_KEY"] == "scripted"


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
