"""PyPI's `anthropic` client against the gateway's Anthropic-compatible route, as its users write
it: `Anthropic(base_url=<gateway>, api_key=<token>)` (the client sends the key as `x-api-key`),
`messages.create` plain and streamed, in front of an Anthropic model and an OpenAI one. Run by
`run.sh`, against a loopback provider that answers every format with the canned text.
"""

import os
import sys
import unittest

import anthropic
from anthropic import Anthropic

CANNED_TEXT = "Hello from the simulator."


def client(key=None):
    return Anthropic(
        base_url=os.environ["OMA_GATEWAY_URL"],
        api_key=key or os.environ["OMA_GATEWAY_TOKEN"],
        timeout=30,
        max_retries=0,
    )


class AnthropicClient(unittest.TestCase):
    def test_plain(self):
        for model in ["claude-sonnet-4-6", "openai/gpt-4o"]:
            message = client().messages.create(
                model=model,
                max_tokens=64,
                system="Be brief.",
                messages=[{"role": "user", "content": "Hello?"}],
            )
            self.assertEqual(message.content[0].text, CANNED_TEXT, model)
            self.assertEqual(message.stop_reason, "end_turn")
            self.assertEqual(message.usage.input_tokens, 12)
            self.assertEqual(message.usage.output_tokens, 6)

    def test_streamed(self):
        with client().messages.stream(
            model="anthropic/claude-sonnet-4-6",
            max_tokens=64,
            messages=[{"role": "user", "content": "Hello?"}],
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        self.assertEqual(text, CANNED_TEXT)
        self.assertEqual(final.usage.output_tokens, 6)

    def test_a_refusal_is_a_bad_request_error(self):
        with self.assertRaises(anthropic.BadRequestError) as caught:
            client().messages.create(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "video",
                                "source": {
                                    "type": "url",
                                    "media_type": "video/mp4",
                                    "url": "https://example.com/a.mp4",
                                },
                            }
                        ],
                    }
                ],
            )
        self.assertIn("video", str(caught.exception).lower())

    def test_a_wrong_token_is_an_authentication_error(self):
        with self.assertRaises(anthropic.AuthenticationError):
            client("not-the-token").messages.create(
                model="claude-sonnet-4-6",
                max_tokens=8,
                messages=[{"role": "user", "content": "Hello?"}],
            )


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
