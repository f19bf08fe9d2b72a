"""A small model that echoes the prompt instead of rating: the examples go on to the end."""

from __future__ import annotations

import pytest

from tests.integration_tests.test_examples import IMPORTANCE, run_example

pytestmark = pytest.mark.usefixtures("warm_commands")  # the example starts warm

ECHO = "On the scale of 1 to 10, where 1 is purely mundane (e.g., brushing teeth)"


def test_the_chat_agent_shows_every_answer_when_no_rating_comes_back(tmp_path, scripted_openai):
    srv = scripted_openai([
        {"when": IMPORTANCE, "reply": ECHO},
        {"when": r"rate the likely poignancy of the following", "reply": "I cannot say."},
        {"when": r"Where does my sister live\?", "reply": "In Porto."},
        {"when": r"我叫山姆", "reply": "你好，山姆！"},
    ])
    turns = tmp_path / "turns.txt"
    turns.write_text("我叫山姆，我妹妹住在波尔图。\nWhere does my sister live?\n", "utf-8")
    done = run_example("chat_agent.py", "--path", str(tmp_path / "m"), "--script", str(turns),
                       env=srv.env())
    assert done.returncode == 0, done.stderr
    assert "Ada> 你好，山姆！" in done.stdout and "Ada> In Porto." in done.stdout
    assert "[6 memories saved" in done.stdout
    assert "UnratedWarning: the model gave no rating for the event" in done.stderr
