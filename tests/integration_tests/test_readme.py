"""README.md and every page of docs/ run in the order they are read, twice, as printed.

The blocks are found, not listed: add a block or a command to a page and it is run here.

**A page is a tour.** Its ``python`` blocks and the commands of its ``bash`` blocks run in
page order, all in one temporary folder for that page, as a reader following the page from a
clone does: the folder holds ``data/``, ``examples/`` and ``benchmarks/`` (links to the
repository's), ``.venv`` (the test's virtual environment, whose ``bin`` is first on ``PATH``,
so ``genmem`` and ``python`` are the installed ones) and ``turns.txt``, two
messages, the reader's own chat script. A block may reopen what an earlier block or command
of the same page stored (``.genmem``...); pages never share a folder. Each python block runs
in its own ``python`` process; each command in ``bash`` with empty input (an interactive
example ends at once), continuation lines joined. ``python`` and ``genmem`` start warm
(``tests/support/warm.py``): each is still a process of its own, forked from a server that
imported the heavy libraries once; the two walks of a page use two servers, so they differ
in hash seed as two readers' runs do.

**Twice.** The whole sequence then runs a second time in the same folder: every python block
must print what it printed the first time (nothing stored twice, nothing shown that a second
reading changes), and every command must succeed again. Commands' output is not compared
between the runs: retrieval marks what it returns as accessed, as in the paper, so a search
run again may rank by the newer access times. One exception, declared by
:data:`IMPORT_ONCE`: ``genmem ... import`` run again must be refused in one ``error:`` line on
stderr (the personas are stored already), with a non-zero status.

**Commands that cannot run here** are skipped by the rules of :data:`SKIPPED`, each with its
reason (a shell setting the test makes itself, an install, a server that runs until stopped,
the reader's own database); a command of a ``bash`` block that no rule runs or skips fails
the test, so nothing is skipped silently. :data:`RUNS` says which commands run: ``genmem``
and the examples' and benchmarks' scripts.

**Services.** Every step gets ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` of a scripted
OpenAI-compatible server (``tests/support/openai_server.py``) answering with
:data:`README_RULES`; a prompt no rule matches gets :data:`DEFAULT_REPLY`. Add a rule there
when a new block needs a reply of its own.

**Output.** A fenced ``text`` block right after a block (nothing but blank lines between) is
what the block prints (a ``bash`` block: its commands' output, in order), compared line by
line (trailing spaces and blank lines aside) on both runs: exactly, unless the block declares
a tolerance. A sample that is not the output gets a line of prose before it.

**Declarations.** An HTML comment just above a block (``<!-- readme-test: WORDS -->``)
declares more:

- ``rerun``: on the first walk the block runs twice in a row; both runs must print the same
  (the second walk runs it once more, and it must print what the first walk did).
- ``needs=model``: the block (or each command of the block) needs a chat model. It also runs
  on a copy of the folder with no ``OPENAI_*`` variable, and with ``OPENAI_BASE_URL`` at a
  port where nothing listens: both times it must fail with a non-zero status and exactly
  one line on stderr (the hint saying what to set), never a traceback.
- ``needs=chroma`` starts the Chroma server of ``tests/support/chroma_server.py`` and passes
  its address as ``CHROMA_HOST`` and ``CHROMA_PORT``; ``needs=postgres`` passes
  ``GENMEM_DSN``, a database with pgvector on the session's PostgreSQL
  (``tests/support/postgres_server.py``), one per page, empty when the page starts;
  ``needs=langgraph`` starts LangGraph's server on this repository's ``langgraph.json``
  (``tests/support/langgraph_server.py``), one per page, and passes its address as
  ``LANGGRAPH_URL``.
- ``tolerance=0.02`` compares the output token by token: every number within 0.02 of the
  one shown, all text exactly.

Any other word fails the test, so a typo cannot switch a check off. A step leaves nothing in
the temporary folder (``TMPDIR``): what a reader copies must clean up after itself.

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
An example that needs a chat model (its docstring says "Needs a chat model") run without one
must exit non-zero with one ``error:`` line on stderr.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.integration_tests.test_examples import RUN_AS_PRINTED
from tests.support.langgraph_server import LanggraphDev
from tests.support.warm import WarmPython, python_command

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
WORDS = re.compile(
    r"rerun|needs=model|needs=chroma|needs=postgres|needs=langgraph"
    r"|tolerance=\d+(\.\d+)?([eE]-?\d+)?")
NUMBER = re.compile(r"(-?\d+(?:\.\d+)?)")
TIMEOUT = 600
# The commands of a bash block that run: the package's command and the repository's scripts.
RUNS = re.compile(r"^(\.venv/bin/)?(genmem\b|python (examples|benchmarks)/)")
# The commands that cannot run here, each with the reason (matched before RUNS).
SKIPPED = [
    (re.compile(r"^(export|source|eval)\b"),
     "sets the reader's shell; the test sets PATH, OPENAI_* and GENMEM_DSN itself"),
    (re.compile(r"^(make|pip)\b"), "installs; the test runs in the installed environment"),
    (re.compile(r"^docker\b"), "a server in docker; needs=postgres gives a database"),
    (re.compile(r"^langgraph dev\b"),
     "a server that runs until stopped (test_langgraph_server.py; needs=langgraph)"),
    (re.compile(r"^python -m langchain_genmem\.llm\.llama_server\b"),
     "a server that runs until stopped (tests/integration_tests/test_small_model.py runs it)"),
    (re.compile(r"^genmem\b.*\s(serve|mcp)(\s|$)"),
     "a server that runs until stopped (test_service_serve.py, test_service_mcp.py)"),
    (re.compile(r"^genmem\b.*\stune\s.*--examples benchmarks/"),
     "learns weights on the whole labelled set, minutes on two cores (test_cli.py tunes small)"),
    (re.compile(r"^curl\b"),
     "a request to a running genmem serve (test_service_docs.py runs it against a real one)"),
    (re.compile(r"^genmem\b.*\sdb (start|stop|status)\b"),
     "the reader's own local PostgreSQL (test_local_postgres.py); needs=postgres stands in"),
]
UNKNOWN = "no rule runs or skips it"
# Run again, an import is refused: the personas are in the store already.
IMPORT_ONCE = re.compile(r"^(\.venv/bin/)?genmem\b.*\simport\s")


@dataclass
class Block:
    """One python or bash block of a page: where it is, its code, what it declares and shows."""

    page: str
    line: int
    code: str
    declared: list[str] = field(default_factory=list)
    shown: str | None = None
    kind: str = "python"

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def tolerance(self) -> float:
        """The declared numeric tolerance, 0 (exact) when none is declared."""
        found = [w.split("=", 1)[1] for w in self.declared if w.startswith("tolerance=")]
        return float(found[-1]) if found else 0.0

    @property
    def commands(self) -> list[str]:
        """A bash block's commands: one a line, continuations joined, comment lines dropped."""
        joined = re.sub(r"[ \t]*\\\n\s*", " ", self.code)
        return [line.strip() for line in joined.splitlines()
                if line.strip() and not line.strip().startswith("#")]


def page_blocks(text: str, page: str = "README.md") -> list[Block]:
    """The python and bash blocks of a markdown text, with the comment above, output below."""
    fences = list(FENCE.finditer(text))
    blocks = []
    for i, fence in enumerate(fences):
        if fence.group(1) not in ("python", "bash"):
            continue
        before = text[: fence.start()].rstrip()
        markers = list(MARKER.finditer(before))
        marker = markers[-1] if markers and markers[-1].end() == len(before) else None
        declared = marker.group(1).split("(")[0].split() if marker else []
        block = Block(page, text.count("\n", 0, fence.start()) + 1, fence.group(2), declared,
                      kind=fence.group(1))
        after = fences[i + 1] if i + 1 < len(fences) else None
        if after is not None and after.group(1) in ("text", "") \
                and not text[fence.end(): after.start()].strip():
            block.shown = after.group(2)
        blocks.append(block)
    return blocks


def skip_reason(command: str, declared: list[str] = ()) -> str | None:
    """Why a command of a bash block does not run here; None when it runs."""
    for rule, reason in SKIPPED:
        if rule.search(command):
            return reason
    if "$GENMEM_DSN" in command and "needs=postgres" not in declared:
        return "names the reader's database (needs=postgres above the block runs it here)"
    return None if RUNS.search(command) else UNKNOWN


ALL_BLOCKS = {path.relative_to(ROOT).as_posix(): page_blocks(path.read_text("utf-8"),
                                                              path.relative_to(ROOT).as_posix())
              for path in PAGES}
BLOCKS = [block for blocks in ALL_BLOCKS.values() for block in blocks if block.kind == "python"]
TOURS = [page for page, blocks in ALL_BLOCKS.items()
         if any(b.kind == "python" or any(skip_reason(c, b.declared) is None for c in b.commands)
                for b in blocks)]


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


def clone(folder: Path, warm: WarmPython) -> Path:
    """A reader's folder: the clone's data, examples and benchmarks, the venv, a chat script."""
    folder.mkdir(parents=True)
    for name in ("data", "examples", "benchmarks"):
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    warm.venv(folder / ".venv")
    (folder / "turns.txt").write_text("My name is Sam.\n我妹妹住在波尔图。\n", "utf-8")
    return folder


def reader_path(warm: WarmPython) -> str:
    """``PATH`` with the test environment's ``python`` and ``genmem`` first, started warm."""
    return os.pathsep.join([str(warm.bin), str(Path(sys.executable).parent), os.environ["PATH"]])


def closed_port() -> int:
    """A port of 127.0.0.1 where nothing listens (an OpenAI server that is not running)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Done:
    """What one step printed, and how it ended."""

    status: int
    out: str
    err: str


def run_step(block: Block, command: str | None, folder: Path, env: dict[str, str]) -> Done:
    """Run a python block (command None) or one command of a bash block in the folder.

    ``python`` and ``genmem`` are the ones first on the ``PATH`` of ``env``.
    """
    argv = ["python", "-c", block.code] if command is None else ["bash", "-c", command]
    done = subprocess.run(argv, cwd=folder, env=env, input="", capture_output=True, text=True,
                          encoding="utf-8", timeout=TIMEOUT, check=False)
    return Done(done.returncode, done.stdout, done.stderr)


def step_name(block: Block, command: str | None) -> str:
    return block.name if command is None else f"{block.name} `{command}`"


class Tour:
    """A reader going through one page: its folder, services, and the first run's output."""

    def __init__(self, page: str, folder: Path, env: dict[str, str],
                 request: pytest.FixtureRequest, warm: WarmPython) -> None:
        self.page, self.folder, self.request = page, clone(folder / "reader", warm), request
        self.tmp = folder / "tmp"
        self.tmp.mkdir()
        self.warm = warm
        self.env = {**env, "TMPDIR": str(self.tmp), "PATH": reader_path(warm)}
        self.dsn: str | None = None
        self.langgraph: LanggraphDev | None = None
        self.first: dict[str, str] = {}
        self.skipped: list[str] = []
        self.seconds: dict[str, float] = {}

    def block_env(self, block: Block, second: bool) -> dict[str, str]:
        env = {**self.env, **self.warm.env(int(second))}
        if "needs=chroma" in block.declared:
            server = self.request.getfixturevalue("chroma_server")
            env |= {"CHROMA_HOST": server.host, "CHROMA_PORT": str(server.port)}
        if "needs=postgres" in block.declared:
            if self.dsn is None:
                server = self.request.getfixturevalue("postgres_server")
                self.dsn = server.create_database(re.sub(r"\W+", "_", f"doc_{self.page}").lower())
            env["GENMEM_DSN"] = self.dsn
        if "needs=langgraph" in block.declared:
            if self.langgraph is None:
                self.langgraph = LanggraphDev(
                    self.tmp.parent / "langgraph",
                    env={"GENMEM_PATH": str(self.tmp.parent / "langgraph-store")})
                self.request.addfinalizer(self.langgraph.close)
                self.langgraph.__enter__()
            env["LANGGRAPH_URL"] = self.langgraph.url
        return env

    def walk(self, second: bool) -> None:
        """Every step of the page in order; the second walk checks it prints the same."""
        for block in ALL_BLOCKS[self.page]:
            steps = [None] if block.kind == "python" else block.commands
            printed = []
            for command in steps:
                reason = None if command is None else skip_reason(command, block.declared)
                assert reason != UNKNOWN, f"{step_name(block, command)}: {reason}"
                if reason is not None:
                    self.skipped.append(f"{step_name(block, command)}: {reason}")
                    continue
                printed.append(self.step(block, command, second))
            if block.shown is not None:
                wrong = differences("".join(printed), block.shown, block.tolerance)
                assert not wrong, f"{block.name} printed otherwise:\n" + "\n".join(wrong)

    def step(self, block: Block, command: str | None, second: bool) -> str:
        name, env = step_name(block, command), self.block_env(block, second)
        if "needs=model" in block.declared and not second:
            self.without_model(block, command, env)
        started = time.perf_counter()
        done = run_step(block, command, self.folder, env)
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
        if second and command is not None and IMPORT_ONCE.search(command):
            refused = done.err.strip().splitlines()
            assert done.status != 0 and len(refused) == 1 and refused[0].startswith("error:"), \
                f"{name} run again: {done.status}, {done.err[-2000:]}"
            return ""
        assert done.status == 0, f"{name} failed:\n{done.err[-4000:]}"
        if "rerun" in block.declared and not second:
            again = run_step(block, command, self.folder, env)
            assert lines(again.out) == lines(done.out), f"{name}: a second run printed otherwise"
        if second and command is None:
            assert lines(done.out) == lines(self.first[name]), \
                f"{name} printed otherwise when the page was done again:\n" \
                + "\n".join(differences(done.out, self.first[name]))
        self.first.setdefault(name, done.out)
        assert list(self.tmp.iterdir()) == [], f"{name} left files in the temporary folder"
        return done.out

    def without_model(self, block: Block, command: str | None, env: dict[str, str]) -> None:
        """On a copy of the folder: no chat model, then a server that is not running."""
        bare = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}
        down = {**bare, "OPENAI_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1"}
        for what, variables in [("no OPENAI_*", bare), ("a server that is down", down)]:
            copy = self.folder.parent / "copy"
            shutil.copytree(self.folder, copy, symlinks=True)
            try:
                done = run_step(block, command, copy, variables)
            finally:
                shutil.rmtree(copy)
            said = done.err.strip().splitlines()
            assert done.status != 0 and len(said) == 1, \
                f"{step_name(block, command)} with {what}: status {done.status}, " \
                f"not one line on stderr:\n{done.err[-3000:]}"


def test_every_page_with_code_has_blocks_and_each_declares_only_known_words() -> None:
    pages = {block.page for block in BLOCKS}
    assert "README.md" in pages and len(pages) >= 8
    for block in (b for blocks in ALL_BLOCKS.values() for b in blocks):
        unknown = [w for w in block.declared if not WORDS.fullmatch(w)]
        assert not unknown, f"{block.name}: unknown readme-test words {unknown}"
        if block.tolerance:
            assert block.shown is not None, f"{block.name}: a tolerance but no output shown"
        unknown = [c for c in block.commands if skip_reason(c, block.declared) == UNKNOWN]
        assert not unknown or block.kind == "python", f"{block.name}: {unknown}"


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT * 3)  # a whole page, twice: longer than one step's TIMEOUT
@pytest.mark.parametrize("page", TOURS)
def test_page_runs_in_order_twice_as_printed(page: str, tmp_path: Path, openai_env: dict,
                                             request: pytest.FixtureRequest,
                                             warm_python: WarmPython) -> None:
    tour = Tour(page, tmp_path, offline_env(**openai_env), request, warm_python)
    tour.walk(second=False)
    tour.walk(second=True)
    print("\n".join(["skipped:", *dict.fromkeys(tour.skipped), "seconds (both runs):",
                     *(f"{t:6.1f} {name}" for name, t in tour.seconds.items())]))


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


def test_bash_blocks_are_commands_that_run_or_are_skipped_with_a_reason() -> None:
    text = ("<!-- readme-test: needs=model -->\n```bash\nexport OPENAI_MODEL=x  # set\n"
            "# a comment line\ngenmem --persona \"Maria Lopez\" search \"午饭\" \\\n"
            "    --relevance hybrid\nrm -rf .genmem\ngenmem --dsn \"$GENMEM_DSN\" db init\n```\n")
    [block] = page_blocks(text, "docs/x.md")
    assert block.kind == "bash" and block.declared == ["needs=model"]
    export, search, remove, init = block.commands
    assert search == 'genmem --persona "Maria Lopez" search "午饭" --relevance hybrid'
    assert skip_reason(export).startswith("sets the reader's shell")
    assert skip_reason(search) is None
    assert skip_reason(remove) == UNKNOWN  # neither run nor skipped: the page test fails
    assert skip_reason(init).startswith("names the reader's database")
    assert skip_reason(init, ["needs=postgres"]) is None
    assert IMPORT_ONCE.search("genmem import data/x") and not IMPORT_ONCE.search(search)


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


# A line shown twice (once offline, once after `export OPENAI_...`) runs once: the test
# environment has the scripted model either way. A line that test_examples.py runs exactly as
# printed, with checks of its own output, is not run a second time here.
USAGE = [(p.name, line) for p in sorted((ROOT / "examples").glob("*.py"))
         for line in dict.fromkeys(usage_lines(p)) if line not in RUN_AS_PRINTED]


def test_every_example_shows_its_usage() -> None:
    named = {name for name, _ in USAGE}
    named |= {line.split("/", 1)[1].split()[0] for line in RUN_AS_PRINTED}
    assert named == {p.name for p in (ROOT / "examples").glob("*.py")}


def run_usage(line: str, tmp_path: Path, env: dict[str, str], warm: WarmPython,
              said: str = "") -> Done:
    """Run an example's usage line in a clone-like folder; ``said`` is what is typed."""
    folder, temp = clone(tmp_path / "clone", warm), tmp_path / "tmp"
    temp.mkdir()
    done = subprocess.run([python_command(env), *shlex.split(line)[1:]], cwd=folder, input=said,
                          env={**env, "TMPDIR": str(temp)}, capture_output=True, text=True,
                          encoding="utf-8", timeout=TIMEOUT, check=False)
    assert list(temp.iterdir()) == [], "the example left files in the temporary folder"
    return Done(done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize(("example", "line"), USAGE, ids=[line for _, line in USAGE])
def test_example_usage_runs_as_printed(example: str, line: str, tmp_path: Path,
                                       openai_env: dict, warm_commands: WarmPython) -> None:
    done = run_usage(line, tmp_path, offline_env(**openai_env), warm_commands)
    assert done.status == 0, done.err[-4000:]
    assert "Traceback" not in done.err


NEEDS_MODEL = [(name, line) for name, line in USAGE
               if "Needs a chat model" in (ROOT / "examples" / name).read_text("utf-8")]


# (test_examples.py runs each example that builds a model against a server that is down.)
@pytest.mark.parametrize(("example", "line"), NEEDS_MODEL, ids=[line for _, line in NEEDS_MODEL])
def test_an_example_that_needs_a_chat_model_fails_in_one_line_without_one(
        example: str, line: str, tmp_path: Path, warm_commands: WarmPython) -> None:
    done = run_usage(line, tmp_path, offline_env(), warm_commands, said="My name is Sam.\n")
    said = done.err.strip().splitlines()
    assert done.status != 0 and len(said) == 1 and said[0].startswith("error:"), \
        f"no OPENAI_*: {done.status}\n{done.err[-3000:]}"
