"""Every example runs offline; the ones that need a model talk to a scripted server.

Whatever stops an example (no model, a model server that is down, a store another process
writes) is one line on stderr, ``error: ...``, and a non-zero exit status.
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest

from langchain_genmem import MemoryStream
from langchain_genmem.backends.locks import FolderLock
from tests.support.processes import free_port
from tests.support.warm import python_command

ROOT = Path(__file__).resolve().parents[2]
IMPORTANCE = r"rate the likely poignancy of each of the following"
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
LOCAL_SERVER = "OPENAI_BASE_URL=http://localhost:11434/v1"
pytestmark = pytest.mark.usefixtures("warm_commands")  # the examples start warm
NO_MODEL = ("error: no chat model: set OPENAI_API_KEY, or point OPENAI_BASE_URL at a local "
            "OpenAI-compatible server (Ollama: http://localhost:11434/v1, llama.cpp's "
            "llama-server, vLLM)")


def docstring(path: Path) -> str:
    """The script's docstring, its lines joined by single spaces."""
    return " ".join((ast.get_docstring(ast.parse(path.read_text("utf-8"))) or "").split())


def builds_a_model(path: Path) -> bool:
    """Whether the script builds a chat model from the OPENAI_* variables."""
    return any(isinstance(node, ast.Call) and getattr(node.func, "id", "") == "chat_model_from_env"
               for node in ast.walk(ast.parse(path.read_text("utf-8"))))


def names(paths) -> list[str]:
    return [p.name for p in paths]


NEEDS_MODEL = names(p for p in EXAMPLES if "Needs a chat model" in docstring(p))
BUILDS_MODEL = names(p for p in EXAMPLES if builds_a_model(p))
TAKES_PATH = names(p for p in EXAMPLES if '"--path"' in p.read_text("utf-8"))


def run_example(name: str, *args: str, env: dict[str, str] | None = None,
                cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run([python_command(base), str(ROOT / "examples" / name), *args],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**base, **(env or {})}, cwd=cwd or ROOT)
    return done


# Usage lines of the examples' docstrings that a test here runs exactly as printed (from the
# clone's root, nothing added; the examples' default store is a temporary folder, which they
# must remove); test_readme.py runs every other one.
SMALLVILLE_AS_PRINTED = "python examples/smallville.py"
QUICKSTART_AS_PRINTED = "python examples/quickstart.py"
DAY_AS_PRINTED = "python examples/reflect_over_a_day.py"
STEPS_AS_PRINTED = "python examples/reflection_step_by_step.py"
STORE_AGENT_AS_PRINTED = ("python examples/store_agent.py",
                          "python examples/store_agent.py --own-tools")
RUN_AS_PRINTED = {SMALLVILLE_AS_PRINTED, QUICKSTART_AS_PRINTED, DAY_AS_PRINTED, STEPS_AS_PRINTED,
                  *STORE_AGENT_AS_PRINTED}


def run_as_printed(line: str, tmp_path: Path, env: dict[str, str] | None = None
                   ) -> subprocess.CompletedProcess[str]:
    """Run a usage line as printed; the temporary folder it used must be left empty."""
    assert line in RUN_AS_PRINTED
    temp = tmp_path / "tmp"
    temp.mkdir()
    script, *args = line.split()[1:]
    done = run_example(script.split("/", 1)[1], *args, env={**(env or {}), "TMPDIR": str(temp)})
    assert list(temp.iterdir()) == [], "the example left files in the temporary folder"
    return done


def test_each_line_run_as_printed_is_a_usage_line_of_its_example():
    from tests.integration_tests.test_readme import usage_lines

    shown = {line for path in EXAMPLES for line in usage_lines(path)}
    assert RUN_AS_PRINTED <= shown, RUN_AS_PRINTED - shown


def test_quickstart(tmp_path):
    done = run_as_printed(QUICKSTART_AS_PRINTED, tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    ranked = out.split("== the same retriever")[0]
    assert ranked.index("Valentine's Day party") < ranked.index("quantum physics")
    assert "System: You are Maria Lopez. Your relevant memories:" in out
    assert "Human: Who invited you to a party?" in out


def test_chat_agent_says_what_to_set_without_a_model(tmp_path):
    done = run_example("chat_agent.py", "--path", str(tmp_path / "m"))
    assert done.returncode == 2
    assert "set OPENAI_API_KEY" in done.stderr and "OPENAI_BASE_URL" in done.stderr


def test_chat_agent_remembers_across_runs(tmp_path, scripted_openai):
    srv = scripted_openai([
        {"when": IMPORTANCE, "reply": "1. 7\n2. 3\n3. 6"},
        # answered only if the second run's prompt carries the first run's memory
        {"when": r"Lena lives in Porto.*Where does my sister live\?",
         "reply": "Your sister Lena lives in Porto."},
        {"when": r"My name is Sam", "reply": "Nice to meet you, Sam! Porto is lovely."},
    ])
    first = tmp_path / "first.txt"
    first.write_text("My name is Sam and my sister Lena lives in Porto.\n", "utf-8")
    second = tmp_path / "second.txt"
    second.write_text("Where does my sister live?\n", "utf-8")
    store = str(tmp_path / "memories")

    one = run_example("chat_agent.py", "--path", store, "--script", str(first), env=srv.env())
    assert one.returncode == 0, one.stderr
    assert "Ada> Nice to meet you, Sam!" in one.stdout
    assert "[Ada remembers 0 memories" in one.stdout and "[3 memories saved" in one.stdout

    two = run_example("chat_agent.py", "--path", store, "--script", str(second), env=srv.env())
    assert two.returncode == 0, two.stderr
    assert "[Ada remembers 3 memories" in two.stdout
    recalled = "(recalled) User said to Ada: My name is Sam and my sister Lena lives in Porto."
    assert recalled in two.stdout
    assert "Ada> Your sister Lena lives in Porto." in two.stdout
    answers = [r for r in srv.requests() if r["reply"] == "Your sister Lena lives in Porto."]
    system = answers[0]["messages"][0]
    assert system["role"] == "system" and "Lena lives in Porto" in system["content"]
    scored = [r for r in srv.requests() if r["rule"] == 0]
    assert len(scored) == 2  # one batched importance call per turn


DAY_RULES = [
    {"when": r"most salient high-level questions",
     "reply": "1) How does Isabella Rodriguez feel about the Valentine's Day party?\n"
              "2) What does Hobbs Cafe mean to Isabella Rodriguez?"},
    {"when": r"high-level insights can you infer",
     "reply": "1. Isabella Rodriguez is excited about the Valentine's Day party (because of 0, 1)\n"
              "2. Isabella Rodriguez takes pride in running Hobbs Cafe (because of 2, 99)"},
    {"when": r"\(subject, predicate, object\) triple",
     "reply": "1. (Isabella Rodriguez, be excited about, Valentine's Day party)\n"
              "2. (Isabella Rodriguez, take pride in, Hobbs Cafe)"},
    {"when": r"rate the likely poignancy of each of the following", "reply": "1. 7\n2. 6"},
    {"when": r"following event for Isabella.*Event: [^\n]*(Valentine|party)", "reply": "8"},
    {"when": r"following event for Isabella", "reply": "3"},
]


def test_reflect_over_a_day(tmp_path, scripted_openai):
    srv = scripted_openai(DAY_RULES)
    done = run_as_printed(DAY_AS_PRINTED, tmp_path, env=srv.env())
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "10:00  [ 8.0] Isabella Rodriguez is planning a Valentine's Day party" in out
    assert "07:00  [ 3.0] Isabella Rodriguez is opening Hobbs Cafe" in out
    assert "\ntrigger: importance since the last reflection 31 of 20: due\n" in out
    assert "reflection: reflected" in out
    assert "Isabella Rodriguez is excited about the Valentine's Day party" in out
    assert "Isabella Rodriguez takes pride in running Hobbs Cafe" in out
    assert out.count("    because: ") >= 3  # every insight cites real memories
    assert "trigger reset to 20" in out
    calls = [r for r in srv.requests() if r["rule"] is not None]
    assert f"{len(calls) - 7} model calls" in out  # 7 events were rated before reflecting


def test_smallville(tmp_path):
    done = run_example(SMALLVILLE_AS_PRINTED.split("/", 1)[1])  # the script, no arguments
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Maria Lopez: 267 memories, clock at 2023-02-13 15:17:40, recency_decay 0.99, " \
           "trigger 19/150" in out
    klaus = out.split("new_retrieve('Klaus Mueller'):")[1].split("new_retrieve(")[0]
    assert klaus.count("Klaus Mueller") >= 3
    college = out.split("new_retrieve('What is Maria working on for college?'):")[1]
    assert "college" in college.split("retrieve() for")[0]
    assert "retrieve() for the latest event 'Klaus Mueller is taking a break':" in out


def test_reflection_step_by_step_runs_offline_by_default(tmp_path):
    done = run_as_printed(STEPS_AS_PRINTED, tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("(offline: a scripted stand-in model answers")
    memories = out.split("# memory_stream.get_memory_df()")[1].split("# memory_stream.retrieve")[0]
    assert " node_8 " in memories and " 0.10 event" in memories  # the coffee, on a 0-1 scale
    retrieved = out.split("'relevance > 0.5')")[1].split("# (questions_fmt")[0]
    relevance = [float(line.split()[-3]) for line in retrieved.strip().splitlines()[1:]]
    assert len(relevance) == 5 and min(relevance) > 0.5
    assert 'questions_fmt = [\n    "How does the large number of missing values' in out
    assert "insights_list = [\n    # insights of question 1\n    [\n" in out
    assert "(reflection, depth 1, importance 0.8, pointers [" in out
    assert "13 memories, 3 of them reflections" in out


SEED004_RULES = [
    {"when": r"most salient high-level questions",
     "reply": "1) Why is the user_dims table unreliable?\n2) 比特币价格数据有什么问题？"},
    {"when": r"high-level insights can you infer",
     "reply": "1. The user_dims table is unreliable for user segmentation [0, 1]\n"
              "2. 比特币价格数据缺失且有异常值 [2]"},
    {"when": r"\(subject, predicate, object\) triple",
     "reply": "1. (user_dims table, be, unreliable)\n2. (比特币价格数据, 有, 异常值)"},
    {"when": r"each of the following 10 memories",
     "reply": "1. 8\n2. 6\n3. 7\n4. 8\n5. 7\n6. 4\n7. 6\n8. 1\n9. 7\n10. 3"},
    {"when": r"each of the following 2 memories", "reply": "1. 7\n2. 6"},
]


def test_reflection_step_by_step_on_the_scripted_server(tmp_path, scripted_openai):
    srv = scripted_openai(SEED004_RULES)
    done = run_example("reflection_step_by_step.py", "--path", str(tmp_path / "s"), env=srv.env())
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "(offline" not in out
    assert " 0.10 event" in out  # rated 1 by the server's model: the coffee
    assert ('questions_fmt = [\n    "Why is the user_dims table unreliable?",\n'
            '    "比特币价格数据有什么问题？",\n]') in out
    assert '("The user_dims table is unreliable for user segmentation", [' in out
    assert "node_11 (reflection, depth 1, importance 0.7, pointers [" in out
    assert "node_12 (reflection, depth 1, importance 0.6, pointers [" in out
    assert "12 memories, 2 of them reflections" in out
    calls = [r["rule"] for r in srv.requests()]
    assert sorted(calls) == [0, 1, 1, 2, 3, 4]  # ratings, questions, 2 x insights, triples, ratings


@pytest.mark.parametrize("line", STORE_AGENT_AS_PRINTED, ids=["langmem", "own-tools"])
def test_store_agent_recalls_across_threads_and_days(tmp_path, line):
    done = run_as_printed(line, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    about_party = lines[lines.index(next(x for x in lines if "about the party?" in x)) + 1]
    assert "The party moved to Hobbs Cafe" in about_party and "Valentine" in about_party
    first_day = lines[lines.index(next(x for x in lines if "first day?" in x)) + 1]
    assert "我喜欢吃饺子" in first_day and "Hobbs Cafe" not in first_day  # created_before
    assert len([x for x in lines if x.strip().startswith("score ")]) == 3


def test_smallville_refuses_a_folder_that_is_not_a_save(tmp_path):
    done = run_example("smallville.py", "data")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: data is not an associative_memory folder")
    assert done.stderr.count("\n") == 1


# ------------------------------------------------------------------ one-line errors


def test_every_example_says_whether_it_needs_a_chat_model():
    for path in EXAMPLES:
        doc = docstring(path)
        says = ("Needs a chat model" in doc, "Needs no chat model" in doc)
        assert says in ((True, False), (False, True)), path.name
        if builds_a_model(path):  # it can talk to a model: show the keyless local server
            assert LOCAL_SERVER in doc, path.name
    assert NEEDS_MODEL == ["chat_agent.py", "reflect_over_a_day.py"]
    assert set(NEEDS_MODEL) < set(BUILDS_MODEL)  # the walkthrough uses one when it is set


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: ")
    return done.stderr.rstrip("\n")


def script(tmp_path: Path) -> str:
    turns = tmp_path / "turns.txt"
    turns.write_text("你好，我叫山姆。\n", "utf-8")
    return str(turns)


@pytest.mark.parametrize("name", NEEDS_MODEL)
def test_without_a_model_an_example_says_what_to_set_in_one_line(name, tmp_path):
    extra = ["--script", script(tmp_path)] if name == "chat_agent.py" else []
    done = run_example(name, "--path", str(tmp_path / "m"), *extra)
    line = one_line_error(done)
    assert line.startswith(NO_MODEL)
    assert done.returncode == 2


@pytest.mark.parametrize("name", BUILDS_MODEL)
def test_an_unreachable_model_server_is_one_line(name, tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    extra = ["--script", script(tmp_path)] if name == "chat_agent.py" else []
    done = run_example(name, "--path", str(tmp_path / "m"), *extra,
                       env={"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": url})
    line = one_line_error(done)
    assert line.startswith(f"error: cannot reach the chat model at {url} (Connection error.): "
                           "start that server, point OPENAI_BASE_URL at one that runs (Ollama")


def test_a_local_server_needs_no_key(tmp_path, scripted_openai):
    srv = scripted_openai(DAY_RULES)
    done = run_example("reflect_over_a_day.py", "--path", str(tmp_path / "day"),
                       env={"OPENAI_BASE_URL": srv.base_url})
    assert done.returncode == 0, done.stderr
    assert "reflection: reflected" in done.stdout
    assert "Isabella Rodriguez is excited about the Valentine's Day party" in done.stdout


@pytest.mark.parametrize("name", TAKES_PATH)
def test_a_library_error_is_one_line(name, tmp_path, scripted_openai):
    # another process (this test) owns the folder as `genmem serve` does: the example is
    # refused at once with a ConcurrentWriterError, a GenMemError, which it prints as one
    # line (a writer that is not an owner is waited for first: tests/integration_tests/
    # test_concurrent_writers.py)
    srv = scripted_openai([], default="5")
    folder = tmp_path / "store"
    extra = ["--script", script(tmp_path)] if name == "chat_agent.py" else []
    with MemoryStream("伊莎贝拉", path=str(folder)) as writer:
        writer.add_event("伊莎贝拉在筹备情人节派对", poignancy=8)
    owner = FolderLock(folder, timeout=0)
    owner.acquire(command="genmem serve", url="http://127.0.0.1:8000")
    try:
        done = run_example(name, "--path", str(folder), *extra, env=srv.env())
    finally:
        owner.release()
    line = one_line_error(done)
    assert "is owned by a running genmem serve" in line and "http://127.0.0.1:8000" in line
    assert done.returncode == 2
