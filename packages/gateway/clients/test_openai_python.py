"""PyPI's `openai` client against the gateway's OpenAI-compatible route, as its users write it:
`OpenAI(base_url=<gateway>/v1, api_key=<token>)`. The gateway (`OMA_GATEWAY_URL`, token
`OMA_GATEWAY_TOKEN`) fronts a loopback provider that answers every format with the canned text
below. Run by `run.sh`; every call is bounded in time.
"""

import os
import sys
import unittest

import openai
from openai import OpenAI

CANNED_TEXT = "Hello from the simulator."
# A 1x1 PNG, as a data URL.
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def client(**kwargs):
    return OpenAI(
        base_url=os.environ["OMA_GATEWAY_URL"] + "/v1",
        api_key=os.environ["OMA_GATEWAY_TOKEN"],
        timeout=30,
        max_retries=0,
        **kwargs,
    )


class OpenAIClient(unittest.TestCase):
    def test_plain(self):
        for model in ["anthropic/claude-sonnet-4-6", "openai/gpt-4o"]:
            answer = client().chat.completions.create(
                model=model,
                messages=[
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hello?"},
                ],
                max_tokens=64,
            )
            self.assertEqual(answer.choices[0].message.content, CANNED_TEXT, model)
            self.assertEqual(answer.choices[0].finish_reason, "stop")
            self.assertTrue(answer.model.startswith(model.split("/")[0] + "/"), answer.model)
            self.assertEqual(answer.usage.prompt_tokens, 12)
            self.assertEqual(answer.usage.completion_tokens, 6)

    def test_streamed(self):
        stream = client().chat.completions.create(
            model="anthropic/claude-sonnet-4-6",
            messages=[{"role": "user", "content": "Hello?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        text = ""
        usage = None
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
            if chunk.usage is not None:
                usage = chunk.usage
        self.assertEqual(text, CANNED_TEXT)
        self.assertIsNotNone(usage)
        self.assertEqual(usage.completion_tokens, 6)

    def test_an_image(self):
        answer = client().chat.completions.create(
            model="openai/gpt-4o",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": PIXEL}},
                    ],
                }
            ],
        )
        self.assertEqual(answer.choices[0].message.content, CANNED_TEXT)

    def test_a_tool_call_round_trip(self):
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "The weather in a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                    },
                },
            }
        ]
        answer = client().chat.completions.create(
            model="anthropic/claude-sonnet-4-6",
            messages=[
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "toolu_1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "toolu_1", "content": "Sunny, 21 C"},
            ],
            tools=tools,
        )
        self.assertEqual(answer.choices[0].message.content, CANNED_TEXT)

    def test_nested_fields_reach_an_openai_target_and_are_refused_by_place_elsewhere(self):
        # An OpenAI-compatible target is sent the client's own request: a participant name, an
        # image's detail and a strict function reach it as written.
        messages = [
            {
                "role": "user",
                "name": "ann",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": PIXEL, "detail": "high"}},
                ],
            }
        ]
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "look",
                    "strict": True,
                    "parameters": {
                        "type": "object",
                        "properties": {"at": {"type": "string"}},
                        "required": ["at"],
                        "additionalProperties": False,
                    },
                },
            }
        ]
        answer = client().chat.completions.create(
            model="openai/gpt-4o", messages=messages, tools=tools
        )
        self.assertEqual(answer.choices[0].message.content, CANNED_TEXT)
        # Anthropic's format has no place for a participant name: refused by its place.
        with self.assertRaises(openai.BadRequestError) as caught:
            client().chat.completions.create(
                model="anthropic/claude-sonnet-4-6", messages=messages, tools=tools
            )
        self.assertIn("`messages[0].name`", str(caught.exception))

    def test_refusals_are_bad_request_errors_with_omas_message(self):
        for url, fragment in [
            ("file:///etc/passwd", "http"),
            ("data:video/mp4;codecs=avc1;base64,AAAA", "parameter"),
        ]:
            with self.assertRaises(openai.BadRequestError) as caught:
                client().chat.completions.create(
                    model="openai/gpt-4o",
                    messages=[
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": "What is in it?"},
                                {"type": "video_url", "video_url": {"url": url}},
                            ],
                        }
                    ],
                )
            self.assertIn(fragment, str(caught.exception).lower(), url)
        with self.assertRaises(openai.BadRequestError) as caught:
            client().chat.completions.create(
                model="anthropic/claude-sonnet-4-6",
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {"type": "video_url", "video_url": {"url": "https://example.com/a.mp4"}}
                        ],
                    }
                ],
            )
        self.assertEqual(caught.exception.code, "UnsupportedContentBlockError")
        self.assertIn("video", str(caught.exception))

    def test_models_list(self):
        ids = [model.id for model in client().models.list()]
        self.assertEqual(ids, ["anthropic/claude-sonnet-4-6", "openai/gpt-4o"])

    def test_a_wrong_token_is_an_authentication_error(self):
        bad = OpenAI(
            base_url=os.environ["OMA_GATEWAY_URL"] + "/v1",
            api_key="not-the-token",
            timeout=30,
            max_retries=0,
        )
        with self.assertRaises(openai.AuthenticationError):
            bad.chat.completions.create(
                model="openai/gpt-4o", messages=[{"role": "user", "content": "Hello?"}]
            )


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
