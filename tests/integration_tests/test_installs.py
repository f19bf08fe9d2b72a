"""The package as a user installs it: `pip install langchain-genmem` (bare) and with the
`service` extra, each into a fresh virtual environment, then the documented commands on the
original simulation's save. The package is installed as PyPI serves it, a wheel: built once
from the checkout (pip's isolated build), then installed bare and with the extra.

The bare package must give a working `genmem` (import, search, stats, keywords, export,
explain as text); a feature of an extra that is missing fails in one `error:` line naming
the extra, and only when it is used. The environment is made once per session (minutes:
pip resolves and installs some hundred packages); the `service` extra is then added to it, as
a user adds an extra, which takes seconds. The environment checks that `langchain_genmem`
is its own, never the checkout's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIMULATION = ROOT / "data" / "generative_agents" / "July1_the_ville_isabella_maria_klaus-step-3-2"
PERSONA = "Isabella Rodriguez"
INSTALL_SECONDS = 900

pytestmark = [pytest.mark.slow, pytest.mark.timeout(INSTALL_SECONDS + 300)]


class Installed:
    """A fresh virtual environment holding the package, and `genmem` run from it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.venv = venv = folder / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                       timeout=INSTALL_SECONDS)
        self.bin = venv / ("Scripts" if os.name == "nt" else "bin")
        self.store = folder / "store"
        # As `make` does first: the pip Python bundles (23.2 with 3.11) resolves the same
        # hundred packages with three times the CPU of a current one
        self.pip("install", "--upgrade", "pip")

    def pip(self, *args: str) -> None:
        done = subprocess.run(
            [str(self.bin / "python"), "-m", "pip", *args, "--quiet"],
            env=self.env(), capture_output=True, text=True, timeout=INSTALL_SECONDS,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]

    def install(self, requirement: str) -> None:
        # --no-compile: pip would byte-compile every module of some hundred packages
        # (sympy, the Kubernetes client...); Python compiles the few that run on import
        self.pip("install", "--no-compile", requirement)

    def env(self) -> dict[str, str]:
        """The user's environment: no checkout on the path, no model, no database.

        Python writes the bytecode of what it imports, as it does for a user (with
        ``--no-compile`` and none written, every command compiled its imports again). The
        run's vector cache is not loaded here: few texts repeat, and the model loads anyway.
        """
        dropped = ("PYTHONPATH", "VIRTUAL_ENV", "GENMEM_DSN", "GENMEM_PERSONA",
                   "PYTHONDONTWRITEBYTECODE")
        env = {k: v for k, v in os.environ.items()
               if k not in dropped and not k.startswith("OPENAI_")}
        return {**env, "PYTHONIOENCODING": "utf-8"}

    def package_file(self) -> Path:
        """Where the environment's Python imports `langchain_genmem` from (found, not run)."""
        done = subprocess.run(
            [str(self.bin / "python"), "-c",
             "import importlib.util; print(importlib.util.find_spec('langchain_genmem').origin)"],
            cwd=self.folder, env=self.env(), capture_output=True, text=True, timeout=300,
            check=True,
        )
        return Path(done.stdout.strip()).resolve()

    def genmem(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin / "genmem"), "--path", str(self.store), *args], cwd=self.folder,
            env=self.env(), capture_output=True, text=True, encoding="utf-8", timeout=300,
            check=False,
        )
        assert done.returncode == code, (args, done.stdout[-2000:], done.stderr[-2000:])
        return done

    def one_line_error(self, *args: str) -> str:
        done = self.genmem(*args, code=2)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
        return done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, as PyPI serves it: built once, by pip in its isolated build
    environment (installing the checkout itself built it again for each install)."""
    folder = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(folder), str(ROOT)],
        capture_output=True, text=True, timeout=INSTALL_SECONDS, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (built,) = folder.glob("langchain_genmem-*.whl")
    return built


@pytest.fixture(scope="module")
def bare(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    installed = Installed(tmp_path_factory.mktemp("installed"))
    installed.install(str(wheel))
    assert installed.package_file().is_relative_to(installed.venv.resolve())
    installed.genmem("import", str(SIMULATION), "--no-progress")
    return installed


@pytest.fixture(scope="module")
def service(bare: Installed, wheel: Path) -> Installed:
    """The same environment with the `service` extra added (after the bare tests, in order)."""
    bare.install(f"{wheel}[service]")
    return bare


def test_the_bare_package_runs_the_documented_commands(bare: Installed) -> None:
    assert "Usage" in bare.genmem("--help").stdout
    found = json.loads(bare.genmem("search", "派对", "-k", "3", "--json", "--peek").stdout)
    assert len(found) == 3 and all(row["persona"] == PERSONA for row in found)
    assert PERSONA in bare.genmem("search", "Valentine's Day party", "-k", "2").stdout
    assert "reflection trigger:" in bare.genmem("stats").stdout
    assert "events indexed under" in bare.genmem("keywords", PERSONA, "plan", "party").stdout
    out = bare.folder / "导出" / "associative_memory"
    bare.genmem("export", str(out))
    assert (out / "nodes.json").is_file()
    explained = bare.genmem("explain", "派对", "-k", "3").stdout
    assert "score = " in explained and "recency" in explained


def test_an_extra_that_is_missing_is_named_in_one_line_when_used(bare: Installed) -> None:
    chart = bare.folder / "chart.png"
    says = bare.one_line_error("explain", "派对", "-o", str(chart))
    assert "pip install 'langchain-genmem[plot]'" in says and not chart.exists()
    says = bare.one_line_error("search", "派对", "--filter", 'type == "event"')
    assert "--filter" in says and "pip install 'langchain-genmem[pandas]'" in says


def test_the_service_extra_brings_serve_and_its_schema(service: Installed) -> None:
    assert "--port" in service.genmem("serve", "--help").stdout
    schema = json.loads(service.genmem("openapi").stdout)
    assert schema["paths"]
    service.genmem("--persona", "伊莎贝拉", "import", str(SIMULATION / "personas" / PERSONA),
                   "--no-progress")
    assert service.genmem("--persona", "伊莎贝拉", "stats").stdout.startswith("伊莎贝拉: 14 ")
