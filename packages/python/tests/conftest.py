import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from loopback import Loopback  # noqa: E402

# Keep the tests' compiled-code cache out of the user's home.
os.environ.setdefault("OMA_COMPONENT_CACHE_DIR", os.path.join(os.path.dirname(__file__), ".pytest-cache-oma"))

KEY = "sk-test-SECRETSECRETSECRET1234"


@pytest.fixture(scope="session")
def server():
    s = Loopback()
    yield s
    s.close()


@pytest.fixture
def loop(server):
    server.script()
    return server


@pytest.fixture
def anthropic(loop):
    """Keyword arguments of an Anthropic agent that talks to the loopback."""
    return dict(model="claude-test", provider="anthropic", base_url=loop.base, api_key=KEY,
                call={"egress": "offline", "timeout_ms": 5000})


@pytest.fixture
def openai(loop):
    return dict(model="gpt-test", provider="openai", base_url=loop.base + "/v1", api_key=KEY,
                call={"egress": "offline", "timeout_ms": 5000})
