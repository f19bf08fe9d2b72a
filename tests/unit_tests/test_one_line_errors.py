"""``one_line_errors``: what a script or a page's block prints when the package refuses."""

from __future__ import annotations

import pytest

from langchain_genmem.core.errors import ChatModelError, ValidationError
from langchain_genmem.llm.chat import MISSING_KEY_HINT, chat_model_from_env, one_line_errors


def test_no_chat_model_is_one_error_line_and_exit_status_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped, one_line_errors():
        chat_model_from_env({})
    assert stopped.value.code == 2
    assert capsys.readouterr().err == f"error: {MISSING_KEY_HINT}\n"


def test_the_cause_of_a_chained_error_is_not_printed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit), one_line_errors(status=1):
        try:
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        except ConnectionRefusedError as e:
            raise ChatModelError("cannot reach the chat model at http://127.0.0.1:9/v1") from e
    assert capsys.readouterr().err.splitlines() == [
        "error: cannot reach the chat model at http://127.0.0.1:9/v1"]


def test_other_errors_pass_through_and_a_clean_block_prints_nothing(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KeyError), one_line_errors():
        raise KeyError("not the package's")
    with one_line_errors():
        pass
    with pytest.raises(SystemExit), one_line_errors():
        raise ValidationError("k: 值必须 ≥ 0", field="k")
    assert capsys.readouterr().err.startswith("error: k: 值必须 ≥ 0")


def test_a_message_of_several_lines_is_printed_on_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit), one_line_errors():
        raise ChatModelError("服务器拒绝了请求:\n  model 'x' not found\n")
    assert capsys.readouterr().err == "error: 服务器拒绝了请求: model 'x' not found\n"
