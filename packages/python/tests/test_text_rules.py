"""OMA's text rules through the package as it calls them: secret redaction (bash output, trace
records, evaluation payloads) and the bash risk classifier are the component's, and the shared
tables the core and the JavaScript package run (``fixtures/redaction.json``,
``fixtures/bash-risk.json``) give exactly their answers here."""

import json
import os

import pytest

import oma_component as oma
from oma_component._codec import is_sensitive_name, redact_sensitive_text

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")


def table(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


def test_redaction_gives_the_shared_table():
    redaction = table("redaction.json")
    assert redaction["texts"] and redaction["names"]
    for case in redaction["texts"]:
        assert redact_sensitive_text(case["text"]) == case["redacted"], case["text"]
    for case in redaction["names"]:
        assert is_sensitive_name(case["name"]) is case["sensitive"], case["name"]


def test_redaction_refuses_what_is_not_text():
    with pytest.raises(TypeError, match="text must be a string, not bytes"):
        redact_sensitive_text(b"api_key=abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="name must be a string, not NoneType"):
        is_sensitive_name(None)  # type: ignore[arg-type]


def test_lone_surrogates_come_back_as_replacement_characters():
    # As the JavaScript package's toWellFormed: no rule matches a lone surrogate, UTF-8 cannot
    # carry one to the component, and a surrogate pair is the character it encodes.
    assert redact_sensitive_text("api_key=\ud800x and \ud83d\ude00") == "api_key=[redacted]"
    assert redact_sensitive_text("note \udc00 \ud83d\ude00") == "note \ufffd \U0001f600"
    assert is_sensitive_name("token\ud800") is False and is_sensitive_name("x_token") is True
    assert oma.classify_bash_command("ls \ud800") == {"level": "safe", "reason": "All segments are read-only commands."}


def test_the_classifier_gives_the_shared_table():
    cases = table("bash-risk.json")["cases"]
    assert cases
    for case in cases:
        assert oma.classify_bash_command(case["command"]) == {"level": case["level"], "reason": case["reason"]}, \
            case["command"]
    for value in (42, None, ["ls"]):
        assert oma.classify_bash_command(value) == {"level": "review",
                                                    "reason": "Empty or non-string command; cannot classify."}


def test_the_bash_tool_redacts_its_output_and_passes_no_secret_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-abcdefghijklmnop1234")
    bash = {t.name: t for t in oma.builtin_tools(cwd=str(tmp_path))}["bash"]
    out = bash({"command": "echo password=hunter2 pass; echo Bearer abcdefghijk; echo ${OPENAI_API_KEY:-unset}"})
    assert out.content == "password=[redacted]\nBearer [redacted]\nunset\n"
