"""PyPI's `anthropic` client against the gateway's Anthropic-compatible route, as its users write
it: `Anthropic(base_url=<gateway>, api_key=<token>)` (the client sends the key as `x-api-key`),
`messages.create` plain and streamed, in front of an Anthropic model and an OpenAI one; the beta
client Claude Code uses (`?beta=true` and `anthropic-beta` on every request), `count_tokens`
and `models.list`. Run by `run.sh`, against a loopback provider that answers every format with
the canned text (and Anthropic's counter with 12).
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

    def test_the_beta_client(self):
        betas = ["claude-code-20250219", "interleaved-thinking-2025-05-14"]
        system = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
        messages = [{"role": "user", "content": "Hello?"}]
        message = client().beta.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=64,
            betas=betas,
            system=system,
            messages=messages,
        )
        self.assertEqual(message.content[0].text, CANNED_TEXT)
        self.assertEqual(message.usage.input_tokens, 12)
        with client().beta.messages.stream(
            model="anthropic/claude-sonnet-4-6",
            max_tokens=64,
            betas=betas,
            system=system,
            messages=messages,
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        self.assertEqual(text, CANNED_TEXT)
        self.assertEqual(final.usage.input_tokens, 12)
        count = client().beta.messages.count_tokens(
            model="claude-sonnet-4-6", betas=betas, system=system, messages=messages
        )
        self.assertEqual(count.input_tokens, 12)

    def test_a_beta_another_provider_cannot_honour_is_refused_by_name(self):
        with self.assertRaises(anthropic.BadRequestError) as caught:
            client().beta.messages.create(
                model="openai/gpt-4o",
                max_tokens=64,
                betas=["context-1m-2025-08-07"],
                messages=[{"role": "user", "content": "Hello?"}],
            )
        self.assertIn("context-1m-2025-08-07", str(caught.exception))

    def test_count_tokens(self):
        # Anthropic's counter, and the estimate for a provider without one.
        messages = [{"role": "user", "content": "How many tokens is this?"}]
        counted = client().messages.count_tokens(model="claude-sonnet-4-6", messages=messages)
        self.assertEqual(counted.input_tokens, 12)
        estimated = client().messages.count_tokens(model="openai/gpt-4o", messages=messages)
        self.assertGreater(estimated.input_tokens, 0)

    def test_models_list(self):
        models = client().models.list()
        self.assertEqual(
            [model.id for model in models.data],
            ["anthropic/claude-sonnet-4-6", "openai/gpt-4o"],
        )
        self.assertEqual(models.data[0].type, "model")

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
