import json

import pytest

import oma_component as oma
from conftest import KEY

VIDEO = [{"role": "user", "content": [{"type": "text", "text": "Describe the clip."},
                                      {"type": "video", "source": {"type": "url", "media_type": "video/mp4",
                                                                   "url": "https://example.com/clip.mp4"}}]}]


def test_validate_returns_list():
    assert oma.validate(VIDEO) == VIDEO
    assert oma.validate(json.dumps(VIDEO)) == VIDEO


@pytest.mark.parametrize("bad, message", [
    ([{"role": "user", "content": [{"type": "video", "source": {"type": "url", "media_type": "video/mp4",
                                                                 "url": "ftp://x/y"}}]}],
     "messages[0].content[0].source.url must use HTTP or HTTPS"),
    ("null", "messages must be an array, got null"),
])
def test_validate_raises_omas_message(bad, message):
    with pytest.raises(oma.InvalidMessageError) as info:
        oma.validate(bad)
    assert info.value.message == message
    assert info.value.code == "INVALID_MESSAGE"
    assert isinstance(info.value, oma.OmaError)


def test_format_request_openai_compatible():
    req = oma.format_request(VIDEO, provider="minimax", model="MiniMax-M1", api_key=KEY, max_tokens=100,
                             temperature=0.5, system_prompt="sys")
    assert req["method"] == "POST"
    assert req["url"] == "https://api.minimax.io/v1/chat/completions"
    assert req["headers"]["authorization"] == f"Bearer {KEY}"
    body = json.loads(req["body"])
    assert body["max_tokens"] == 100 and body["temperature"] == 0.5
    assert body["messages"][0] == {"role": "system", "content": "sys"}
    assert body["messages"][1]["content"][1] == {"type": "video_url", "video_url": {"url": "https://example.com/clip.mp4"}}


def test_format_request_anthropic_tools():
    tool = oma.Tool("lookup", "Looks up", {"type": "object", "properties": {"q": {"type": "string"}}}, lambda a: "")
    req = oma.format_request([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], provider="anthropic",
                             model="claude-test", base_url="http://127.0.0.1:1", tools=[tool], max_tokens=10)
    assert req["url"] == "http://127.0.0.1:1/v1/messages"
    body = json.loads(req["body"])
    assert body["tools"][0]["name"] == "lookup"
    assert body["tools"][0]["input_schema"]["properties"]["q"]["type"] == "string"


def test_format_request_unsupported_video():
    with pytest.raises(oma.UnsupportedContentBlockError) as info:
        oma.format_request(VIDEO, provider="anthropic", model="claude")
    e = info.value
    assert e.name == "UnsupportedContentBlockError" and e.code == "UNSUPPORTED_CONTENT_BLOCK"
    assert e.retryable is False and "video" in e.message
    assert e.provider == "Anthropic Messages" and e.block_type == "video"
    assert e.message == ('Anthropic Messages cannot represent the "video" content block: '
                         "OMA does not map video for this adapter yet")
    assert e.to_dict()["blockType"] == "video"


def test_format_request_invalid_message():
    with pytest.raises(oma.InvalidMessageError):
        oma.format_request([{"role": "user", "content": [{"type": "video", "source": {"type": "url",
                           "media_type": "video/mp4", "url": "javascript:x"}}]}], provider="openai", model="m")


def test_format_request_unknown_provider_without_base_url():
    with pytest.raises(oma.OmaError) as info:
        oma.format_request(VIDEO[:0], provider="nowhere", model="m")
    assert info.value.name == "Error" or info.value.kind == "other"


def test_parse_response_anthropic():
    body = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                       "content": [{"type": "text", "text": "hi"},
                                   {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}],
                       "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}})
    out = oma.parse_response(body, provider="anthropic", model="claude-test")
    assert out["id"] == "msg_1" and out["stop_reason"] == "tool_use"
    assert out["content"] == [{"type": "text", "text": "hi"},
                              {"type": "tool_use", "id": "t1", "name": "f", "input": {"x": 1}}]
    assert out["usage"] == {"input_tokens": 3, "output_tokens": 4}
    with pytest.raises(oma.ProviderError):
        oma.parse_response("not json", provider="anthropic", model="m")


def test_error_to_dict():
    try:
        oma.validate("null")
    except oma.OmaError as e:
        assert e.to_dict() == {"name": "InvalidMessageError", "code": "INVALID_MESSAGE",
                               "message": "messages must be an array, got null", "retryable": False}


@pytest.mark.parametrize("given, message", [
    ({}, "messages must be an array, got object"),
    ({"role": "user", "content": []}, "messages must be an array, got object"),
    (None, "messages must be an array, got null"),
    ("x", "messages must be an array, got string"),
    ("not json at all", "messages must be an array, got string"),
    ("null", "messages must be an array, got null"),
    ('{"a": 1}', "messages must be an array, got object"),
    (3, "messages must be an array, got number"),
])
def test_the_guard_applies_to_whatever_is_given(given, message, anthropic):
    with pytest.raises(oma.InvalidMessageError) as info:
        oma.validate(given)
    assert info.value.message == message
    with pytest.raises(oma.InvalidMessageError, match=message):
        oma.format_request(given, provider="anthropic", model="m")
    if not isinstance(given, str):
        with pytest.raises(oma.InvalidMessageError, match=message):
            oma.Agent(**anthropic).run(given)
    if given is not None and not isinstance(given, str):  # None is no history
        with pytest.raises(oma.InvalidMessageError, match=message):
            oma.Agent(history=given, **anthropic)


BYTES_IMAGE = [{"role": "user", "content": [{"type": "text", "text": "see"},
                                            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                         "data": b"\x89PNG"}}]}]


def test_bytes_for_base64_data_are_refused_naming_the_path(anthropic, loop):
    path = "messages[0].content[1].source.data must be JSON data, got bytes"
    for call in (lambda: oma.validate(BYTES_IMAGE),
                 lambda: oma.format_request(BYTES_IMAGE, provider="anthropic", model="m"),
                 lambda: oma.Agent(**anthropic).run(BYTES_IMAGE),
                 lambda: oma.Agent(**anthropic).stream(BYTES_IMAGE),
                 lambda: oma.run_agent(BYTES_IMAGE, **anthropic),
                 lambda: oma.Agent(history=BYTES_IMAGE, **anthropic)):
        with pytest.raises(oma.InvalidMessageError) as info:
            call()
        assert info.value.message == path
        assert info.value.code == "INVALID_MESSAGE"
    with pytest.raises(oma.InvalidMessageError, match=r"^messages\[0\]\.content\[0\]\.source\.data must be JSON data"):
        oma.Agent(**anthropic).prompt(BYTES_IMAGE[0]["content"][1:])
    assert loop.requests == []


def test_values_json_cannot_carry_are_refused_naming_the_path():
    cyclic: list = [{"role": "user", "content": []}]
    cyclic[0]["content"].append(cyclic)
    with pytest.raises(oma.InvalidMessageError, match=r"messages\[0\]\.content\[0\] must be JSON data: it contains a circular"):
        oma.validate(cyclic)
    with pytest.raises(oma.InvalidMessageError, match=r"messages\[0\]\.content\[0\]\.x must be JSON data, got nan"):
        oma.validate([{"role": "user", "content": [{"x": float("nan")}]}])
    with pytest.raises(oma.InvalidMessageError, match=r"messages\[0\] must be JSON data, got set"):
        oma.validate([{1, 2}])
