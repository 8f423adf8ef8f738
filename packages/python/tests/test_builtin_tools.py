"""OMA's built-in tools in Python (``builtin_tools``): the same names, descriptions and input
schemas as the JavaScript package (``fixtures/builtin-tools/definitions.json``), the input checks
zod makes (``fixtures/builtin-tools/inputs.json``) and OMA's answers (``texts.json``), both run by
both packages, OMA's output texts, limits and sandbox, and the tools driven by an Agent against the loopback provider."""

import json
import os
import time

import pytest

import oma_component as oma
from oma_component import _builtin_tools
from loopback import Reply, anthropic_text, anthropic_tool_use

DEFINITIONS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "builtin-tools", "definitions.json")


@pytest.fixture
def box(tmp_path):
    root = os.path.realpath(tmp_path)
    return root, {t.name: t for t in oma.builtin_tools(cwd=root)}


def test_definitions_match_the_shared_fixture():
    shared = {d["name"]: d for d in json.load(open(DEFINITIONS, encoding="utf-8"))}
    tools = oma.builtin_tools()
    assert [t.name for t in tools] == list(oma.BUILT_IN_TOOL_NAMES) == ["bash", "file_read", "file_write", "file_edit", "grep", "glob"]
    for tool in tools:
        assert tool.definition() == {"name": tool.name, "description": shared[tool.name]["description"],
                                     "inputSchema": shared[tool.name]["inputSchema"]}


INPUTS = json.load(open(os.path.join(os.path.dirname(DEFINITIONS), "inputs.json"), encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", INPUTS, ids=[f"{c['tool']} {json.dumps(c['input'])}" for c in INPUTS])
def test_input_checks_give_the_shared_table(case):
    # The table is zod's verdict on each input (the JavaScript package's test holds it to zod);
    # the check runs before a tool does anything, so an accepted input is read back as given.
    tool = {t.name: t for t in oma.builtin_tools(cwd=None)}[case["tool"]]
    fields = dict(zip(oma.BUILT_IN_TOOL_NAMES, (_builtin_tools._BASH, _builtin_tools._READ, _builtin_tools._WRITE,
                                                 _builtin_tools._EDIT, _builtin_tools._GREP, _builtin_tools._GLOB)))[case["tool"]]
    if "error" in case:
        with pytest.raises(ValueError) as e:
            tool(case["input"])
        assert str(e.value) == case["error"]
    else:
        assert _builtin_tools._check(case["tool"], fields, case["input"]) == case["data"]


def test_answers_give_the_shared_table(tmp_path):
    # fixtures/builtin-tools/texts.json, run by the JavaScript package too.
    table = json.load(open(os.path.join(os.path.dirname(DEFINITIONS), "texts.json"), encoding="utf-8"))
    root = os.path.realpath(tmp_path)
    for name, content in table["files"].items():
        os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
        with open(os.path.join(root, name), "w", encoding="utf-8", newline="") as f:
            f.write(content)
    tools = {t.name: t for t in oma.builtin_tools(cwd=root)}
    for case in table["cases"]:
        given = json.loads(json.dumps(case["input"]).replace("{root}", root))
        answer = tools[case["tool"]](given)
        assert {"data": answer.content.replace(root, "{root}"), "isError": answer.is_error} == case["expect"], case


def test_file_tools_texts_and_rules(box):
    root, t = box
    path = os.path.join(root, "sub", "a.txt")
    assert t["file_write"]({"path": path, "content": "one\ntwo\nthree\n"}) == oma.ToolResult(f'Created "{path}" (4 lines, 14 bytes).', False)
    assert t["file_write"]({"path": path, "content": "alpha\nbeta\ngamma\nbeta"}).content == f'Updated "{path}" (4 lines, 21 bytes).'
    assert t["file_read"]({"path": path}).content == "1\talpha\n2\tbeta\n3\tgamma\n4\tbeta"
    assert t["file_read"]({"path": path, "offset": 2, "limit": 2}).content == "2\tbeta\n3\tgamma\n\n(showing lines 2–3 of 4)"
    assert t["file_read"]({"path": path, "offset": 9}) == oma.ToolResult(f'File "{path}" has 4 lines but offset 9 is beyond the end.', True)
    twice = t["file_edit"]({"path": path, "old_string": "beta", "new_string": "B"})
    assert twice.is_error and twice.content.startswith("`old_string` appears 2 times in ")
    assert t["file_edit"]({"path": path, "old_string": "nope", "new_string": "B"}).content.startswith("The string to replace was not found in")
    assert t["file_edit"]({"path": path, "old_string": "beta", "new_string": "B", "replace_all": True}).content == f'Replaced 2 occurrences in "{path}".'
    assert open(path, encoding="utf-8").read() == "alpha\nB\ngamma\nB"


def test_sandbox(box, tmp_path_factory):
    root, t = box
    outside = os.path.realpath(tmp_path_factory.mktemp("outside"))
    open(os.path.join(outside, "secret.txt"), "w").write("secret")
    assert t["file_read"]({"path": "rel.txt"}).content == 'Path "rel.txt" must be absolute. Built-in filesystem tools require absolute paths.'
    assert "is outside the agent's working directory" in t["file_read"]({"path": os.path.join(root, "..", "x")}).content
    os.symlink(outside, os.path.join(root, "link"))
    escaped = t["file_read"]({"path": os.path.join(root, "link", "secret.txt")})
    assert escaped.is_error and "is outside the agent's working directory" in escaped.content
    fresh = {x.name: x for x in oma.builtin_tools(cwd=os.path.join(root, "fresh"))}
    assert fresh["file_read"]({"path": os.path.join(root, "fresh", "a")}).content.startswith("Could not resolve working directory")
    assert fresh["file_write"]({"path": os.path.join(root, "fresh", "a"), "content": "x"}).is_error is False
    open_tools = {x.name: x for x in oma.builtin_tools(cwd=None)}
    assert open_tools["file_read"]({"path": os.path.join(outside, "secret.txt")}).content == "1\tsecret"


def test_glob_and_grep(box):
    root, t = box
    for f in ["b.ts", "a.ts", "c.md", "src/d.ts", "node_modules/x.ts", ".git/y.ts"]:
        os.makedirs(os.path.dirname(os.path.join(root, f)), exist_ok=True)
        open(os.path.join(root, f), "w").write(f"hello {f}\nbye\n")
    assert t["glob"]({"pattern": "**/*.ts"}).content == "a.ts\nb.ts\nsrc/d.ts"
    assert t["glob"]({"maxFiles": 2}).content.split("\n\n")[1] == "(listing capped at 2 paths; raise maxFiles for more)"
    assert t["glob"]({"pattern": "*.none"}).content == "No files matched."
    assert t["grep"]({"pattern": "hello .*\\.md"}).content == "c.md:1:hello c.md"
    assert t["grep"]({"pattern": "("}) == oma.ToolResult('Invalid regular expression: "("', True)
    assert t["grep"]({"pattern": "zzz"}).content == "No matches found."
    assert t["grep"]({"pattern": "hello", "glob": "*.ts", "path": os.path.join(root, "src")}).content == "src/d.ts:1:hello src/d.ts"


def test_bash(box):
    root, t = box
    bash = t["bash"]
    assert bash({"command": "echo out; echo err >&2"}) == oma.ToolResult("out\n\n--- stderr ---\nerr\n", False)
    assert bash({"command": "exit 3"}) == oma.ToolResult("(command exited with code 3, no output)", True)
    assert bash({"command": "true"}) == oma.ToolResult("(command completed with no output)", False)
    assert bash({"command": "echo nope; exit 2"}) == oma.ToolResult("nope\n\n\n(exit code: 2)", True)
    assert bash({"command": "echo api_key=abc123 sk-abcdefghijklmnop1234"}).content == "api_key=[redacted]\n"
    started = time.monotonic()
    assert bash({"command": "sleep 5", "timeout": 150}) == oma.ToolResult("(command exited with code 124, no output)", True)
    assert time.monotonic() - started < 3
    assert bash({"command": "pwd", "cwd": root}).content == f"{root}\n"
    assert bash({"command": "echo ${OPENAI_API_KEY:-unset}"}).content == "unset\n"
    missing = bash({"command": "ls", "cwd": os.path.join(root, "missing")})
    assert missing.is_error and missing.content.endswith("(exit code: 127)")


def test_an_agent_runs_the_builtins(loop, anthropic, tmp_path):
    root = os.path.realpath(tmp_path)
    target = os.path.join(root, "note.txt")
    loop.script(
        Reply(body=anthropic_tool_use([{"id": "w", "name": "file_write", "input": {"path": target, "content": "hi\n"}}])),
        Reply(body=anthropic_tool_use([{"id": "r", "name": "file_read", "input": {"path": target}},
                                       {"id": "x", "name": "file_read", "input": {"path": "/etc/hostname"}}])),
        Reply(body=anthropic_text("Done.")),
    )
    agent = oma.Agent(name="fs", tools=oma.builtin_tools(cwd=root), **anthropic)
    result = agent.run("Write and read a note.")
    assert result["success"] is True
    assert [(c["toolName"], c["output"]) for c in result["toolCalls"]] == [
        ("file_write", f'Created "{target}" (2 lines, 3 bytes).'),
        ("file_read", "1\thi"),
        ("file_read", f'Path "/etc/hostname" is outside the agent\'s working directory "{root}". '
                      "Built-in filesystem tools are sandboxed to this directory; set OrchestratorConfig.defaultCwd / "
                      "AgentConfig.cwd to widen it, or AgentConfig.cwd: null to disable the sandbox."),
    ]
    sent = [t["name"] for t in loop.requests[0]["body"]["tools"]]
    assert sent == ["bash", "file_read", "file_write", "file_edit", "grep", "glob"]
    assert loop.requests[0]["body"]["tools"][1]["input_schema"]["properties"]["offset"]["type"] == "number"
    last = loop.requests[-1]["body"]["messages"][-1]["content"]
    # As OMA's built-in tools, a success says `isError: false`, sent as it was said.
    assert [b.get("is_error") for b in last] == [False, True]
