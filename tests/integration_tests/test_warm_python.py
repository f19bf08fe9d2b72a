"""A warm ``python`` or ``genmem`` (tests/support/warm.py) behaves as a fresh interpreter does.

Each case runs the same command cold (this environment's interpreter) and warm (the shim),
and compares what a caller can see: status, stdout, stderr, and what the command sees of its
arguments, folder, environment, path and stdin.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.warm import WarmPython

SEES = """\
import atexit, os, sys
print(sys.argv[1:], repr(sys.path[0]), os.getcwd(), os.environ.get("WHO"), input(), flush=True)
print("中文", file=sys.stderr)
atexit.register(lambda: print("at exit"))
print("no newline", end="")
raise SystemExit(int(sys.argv[1]))
"""
FAILS = "def f():\n    return {}['键']\n\nf()\n"


@pytest.fixture(scope="module")
def polling(tmp_path_factory: pytest.TempPathFactory):
    """A server that polls for ended commands, as on a system without pidfds."""
    with WarmPython(tmp_path_factory.mktemp("polling"), servers=1, polling=True) as servers:
        yield servers


@pytest.fixture
def warm(warm_python: WarmPython) -> WarmPython:
    return warm_python


def run(argv: list[str], folder: Path, warm: WarmPython | None, server: int = 0,
        **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WHO": "山姆", **extra}
    if warm is not None:
        env |= {**warm.env(server), "PATH": warm.path(env)}
        argv = [str(warm.bin / argv[0]), *argv[1:]]
    else:
        argv = [sys.executable if argv[0] == "python" else
                str(Path(sys.executable).parent / argv[0]), *argv[1:]]
    return subprocess.run(argv, cwd=folder, env=env, input="typed 输入\n", capture_output=True,
                          text=True, encoding="utf-8", timeout=120, check=False)


def same(argv: list[str], folder: Path, warm: WarmPython) -> subprocess.CompletedProcess[str]:
    cold, hot = run(argv, folder, None), run(argv, folder, warm)
    assert (hot.returncode, hot.stdout, hot.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    return hot


def test_code_scripts_and_modules_see_and_end_as_in_a_fresh_interpreter(
        warm: WarmPython, tmp_path: Path) -> None:
    (tmp_path / "sees.py").write_text(SEES, "utf-8")
    done = same(["python", "-c", SEES, "3", "参数"], tmp_path, warm)
    assert done.returncode == 3 and "['3', '参数'] '' " in done.stdout
    assert done.stdout.endswith("no newline" + "at exit\n") and "typed 输入" in done.stdout
    assert same(["python", "sees.py", "4"], tmp_path, warm).returncode == 4
    assert same(["python", "-m", "sees", "0"], tmp_path, warm).returncode == 0


def test_an_uncaught_error_prints_the_same_traceback(warm: WarmPython, tmp_path: Path) -> None:
    done = same(["python", "-c", FAILS], tmp_path, warm)
    assert done.returncode == 1 and done.stderr.endswith("KeyError: '键'\n")
    assert "warm" not in done.stderr and "runpy" not in done.stderr


def test_genmem_runs_the_installed_command(warm: WarmPython, tmp_path: Path) -> None:
    assert same(["genmem", "--help"], tmp_path, warm).returncode == 0
    assert same(["genmem", "search", "--no-such-option"], tmp_path, warm).returncode == 2


def test_the_test_sitecustomize_applies_in_warm_commands(warm: WarmPython, tmp_path: Path) -> None:
    code = "import sys; print(sorted(m for m in sys.modules if m.startswith('_genmem_')))"
    done = same(["python", "-c", code], tmp_path, warm)
    if os.environ.get("GENMEM_TEST_EMBEDDING_CACHE", "").strip():
        assert "_genmem_embedding_cache" in done.stdout


def test_an_option_the_server_cannot_honour_runs_the_real_interpreter(
        warm: WarmPython, tmp_path: Path) -> None:
    done = same(["python", "-I", "-c", "import sys; print(sys.flags.isolated)"], tmp_path, warm)
    assert done.stdout == "1\n"


def test_each_server_has_its_own_hash_seed(warm: WarmPython, tmp_path: Path) -> None:
    code = "print(hash('seed'))"
    one, two = (run(["python", "-c", code], tmp_path, warm, n).stdout for n in (0, 1))
    assert one != two


@pytest.mark.parametrize("server", ["pidfd", "polling"])
def test_signals_reach_the_command_and_a_killed_shim_takes_it_along(
        server: str, warm_python: WarmPython, polling: WarmPython, tmp_path: Path) -> None:
    warm = warm_python if server == "pidfd" else polling
    assert same(["python", "-c", FAILS], tmp_path, warm).returncode == 1
    code = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *_: sys.exit(5))\n"
            "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
            "time.sleep(60)\n")
    env = {**os.environ, **warm.env(0)}
    for signal_number, status in [(signal.SIGTERM, 5), (signal.SIGKILL, -signal.SIGKILL)]:
        pid_file = tmp_path / f"pid{signal_number}"
        shim = subprocess.Popen([str(warm.bin / "python"), "-c", code, str(pid_file)], env=env)
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and shim.poll() is None
            time.sleep(0.05)
        command = int(pid_file.read_text())
        assert command != shim.pid
        shim.send_signal(signal_number)
        assert shim.wait(timeout=30) == status
        while Path(f"/proc/{command}").exists():  # the server reaps it: gone, not a zombie
            assert time.monotonic() < deadline, f"the command {command} outlived its shim"
            time.sleep(0.05)


def ended(pid: int) -> bool:
    """Whether ``pid`` is gone (or a zombie nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("polls", [False, True])
def test_a_server_ends_with_the_process_that_started_it(polls: bool) -> None:
    code = ("import os, sys\nfrom tests.support.warm import WarmPython\n"
            f"warm = WarmPython(servers=1, polling={polls}).__enter__()\n"
            "print(warm._procs[0].pid, warm.folder, flush=True)\nos._exit(0)\n")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                          timeout=120, check=True)
    pid, folder = done.stdout.split(maxsplit=1)
    server = int(pid)
    deadline = time.monotonic() + 30
    try:
        while not ended(server):
            assert time.monotonic() < deadline, f"the server {server} outlived its process"
            time.sleep(0.05)
    finally:
        shutil.rmtree(folder.strip(), ignore_errors=True)


def test_popen_gives_the_commands_own_pid_and_waits_as_popen_does(
        warm: WarmPython, tmp_path: Path) -> None:
    code = "import os, sys, time\nprint(os.getpid(), flush=True)\ntime.sleep(float(sys.argv[1]))"
    with (tmp_path / "out").open("wb") as out:
        proc = warm.popen([sys.executable, "-c", code, "60"], stdout=out,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    assert proc.poll() is None
    deadline = time.monotonic() + 60
    while not (tmp_path / "out").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert int((tmp_path / "out").read_text()) == proc.pid
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL == proc.poll()
    done = warm.run([sys.executable, "-c", "import sys; print(input()[::-1]); sys.exit(4)"],
                    input="山姆\n", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (4, "姆山\n", "")
