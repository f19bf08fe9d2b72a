"""What a fresh clone shows: `make demo` is not silent while it installs; stores stay untracked."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_first_make_demo_shows_pip_progress(tmp_path: Path) -> None:
    done = subprocess.run(["make", "-n", "demo", f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    commands = done.stdout.splitlines()
    install = [c for c in commands if "pip install" in c and "-e " in c]
    assert len(install) == 1
    assert "--quiet" not in install[0] and " -q" not in install[0]
    assert "--progress-bar on" in install[0]
    assert any(c.startswith("echo") and "First run" in c for c in commands)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs a git checkout")
@pytest.mark.parametrize("path", [
    ".langgraph_api/store.pckl", ".genmem/chroma.sqlite3", ".genmem-chat/chroma.sqlite3",
    ".genmem-smallville/chroma.sqlite3", "out/associative_memory/nodes.json",
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
