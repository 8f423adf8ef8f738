"""OMA's built-in tools for Python agents: ``bash``, ``file_read``, ``file_write``, ``file_edit``,
``grep`` and ``glob``, with OMA's names, descriptions and input schemas (the JavaScript package's,
checked against ``fixtures/builtin-tools/definitions.json``), OMA's output texts and limits, and
OMA's sandbox: every path must be absolute and, symlinks resolved, inside the working directory
(``<cwd>/.agent-workspace`` unless given; ``cwd=None`` turns the sandbox off).

Python tools get no run context, so the working directory is bound when the tools are made:
``builtin_tools(cwd=...)``. ``delegate_to_agent`` (team delegation) is not here: the package runs
single agents. Invalid input is refused before anything runs, with zod's messages as OMA gives
them (``Invalid input for tool "file_read":\\n  • offset: ...``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._agent.tool import Tool, ToolResult
from ._codec import is_sensitive_name, redact_sensitive_text

__all__ = ["builtin_tools", "BUILT_IN_TOOL_NAMES", "DEFAULT_WORKSPACE_DIRNAME"]

#: The built-ins in OMA's order.
BUILT_IN_TOOL_NAMES: Tuple[str, ...] = ("bash", "file_read", "file_write", "file_edit", "grep", "glob")
#: The default sandbox's directory name, under the process's working directory.
DEFAULT_WORKSPACE_DIRNAME = ".agent-workspace"


class _Default:
    def __repr__(self) -> str:
        return "<default workspace>"


_DEFAULT: Any = _Default()
Cwd = Union[str, "os.PathLike[str]", None, _Default]

# -- input schemas: JSON Schema for the model, checks as zod makes them ---------------------------

# (name, type, optional, checks, description); checks: "int", "nonnegative", "positive", "min1".
_Field = Tuple[str, str, bool, Tuple[str, ...], str]


def _schema(fields: Sequence[_Field]) -> Dict[str, Any]:
    properties = {name: {"type": kind, "description": text} for name, kind, _, _, text in fields}
    required = [name for name, _, optional, _, _ in fields if not optional]
    out: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def _received(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "nan" if value != value else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _check(tool: str, fields: Sequence[_Field], value: Any) -> Dict[str, Any]:
    """The input with unknown keys dropped, or ValueError with OMA's message listing zod's issues."""
    issues: List[str] = []
    out: Dict[str, Any] = {}
    if not isinstance(value, Mapping):
        issues.append(f": Expected object, received {_received(value)}")
    else:
        for name, kind, optional, checks, _ in fields:
            if name not in value:
                if not optional:
                    issues.append(f"{name}: Required")
                continue
            item = value[name]
            got = _received(item)
            if got != kind:
                issues.append(f"{name}: Expected {kind}, received {got}")
                continue
            for check in checks:
                if check == "int" and not float(item).is_integer():
                    issues.append(f"{name}: Expected integer, received float")
                elif check == "nonnegative" and item < 0:
                    issues.append(f"{name}: Number must be greater than or equal to 0")
                elif check == "positive" and item <= 0:
                    issues.append(f"{name}: Number must be greater than 0")
                elif check == "min1" and len(item) < 1:
                    issues.append(f"{name}: String must contain at least 1 character(s)")
            out[name] = item
    if issues:
        raise ValueError(f'Invalid input for tool "{tool}":\n' + "\n".join(f"  • {i}" for i in issues))
    return out


# -- the sandbox ----------------------------------------------------------------------------------


def _inside(candidate: str, root: str) -> bool:
    rel = os.path.relpath(candidate, root)
    return rel == "." or (not rel.startswith("..") and not os.path.isabs(rel))


class _Sandbox:
    """OMA's path rule for one working directory (``None``: no sandbox)."""

    def __init__(self, cwd: Cwd) -> None:
        if isinstance(cwd, _Default):
            self.root: Optional[str] = os.path.join(os.getcwd(), DEFAULT_WORKSPACE_DIRNAME)
        elif cwd is None:
            self.root = None
        else:
            self.root = os.path.abspath(os.fspath(cwd))

    def resolve(self, path: str, ensure_root: bool = False) -> Tuple[str, str]:
        """``(real path, real root)``, or ValueError with OMA's text."""
        if self.root is None:
            return path, "/"
        if not os.path.isabs(path):
            raise _Refusal(f'Path "{path}" must be absolute. Built-in filesystem tools require absolute paths.')
        root = self.root
        try:
            real_root = os.path.realpath(root, strict=True)
        except OSError as e:
            if not ensure_root:
                raise _Refusal(f'Could not resolve working directory "{root}": {_reason(e)}') from None
            try:
                os.makedirs(root, exist_ok=True)
                real_root = os.path.realpath(root, strict=True)
            except OSError as e2:
                raise _Refusal(f'Could not create or resolve working directory "{root}": {_reason(e2)}') from None
        candidate = os.path.normpath(path)
        real = os.path.realpath(candidate)
        if not _inside(candidate, root) or not _inside(real, real_root):
            raise _Refusal(
                f'Path "{candidate}" is outside the agent\'s working directory "{real_root}". '
                "Built-in filesystem tools are sandboxed to this directory; "
                "set OrchestratorConfig.defaultCwd / AgentConfig.cwd to widen it, "
                "or AgentConfig.cwd: null to disable the sandbox."
            )
        return real, real_root

    def default_dir(self) -> str:
        return self.root if self.root is not None else os.path.join(os.getcwd(), DEFAULT_WORKSPACE_DIRNAME)


class _Refusal(Exception):
    """A tool's error result text."""


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def _error(text: str) -> ToolResult:
    return ToolResult(text, is_error=True)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# -- bash -----------------------------------------------------------------------------------------

_ENV_ALLOWED = {"HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TEMP", "TERM", "TMP", "TMPDIR", "USER"}
DEFAULT_TIMEOUT_MS = 30_000


def _safe_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in _ENV_ALLOWED and not is_sensitive_name(k)}


def _run_bash(command: str, cwd: Optional[str], timeout_ms: float) -> Tuple[str, str, int]:
    try:
        child = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=_safe_env(), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as e:
        return "", str(e), 127
    try:
        out, err = child.communicate(timeout=max(timeout_ms, 0) / 1000)
        code = child.returncode if child.returncode >= 0 else 1
    except subprocess.TimeoutExpired:
        # The whole process group, so background children do not outlive the command.
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            child.kill()
        out, err = child.communicate()
        code = 124
    return out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), code


def _render(stdout: str, stderr: str, code: int) -> str:
    parts = [p for p in (stdout, (f"--- stderr ---\n{stderr}" if stdout else stderr) if stderr else "") if p]
    if not parts:
        return "(command completed with no output)" if code == 0 else f"(command exited with code {code}, no output)"
    if code != 0:
        parts.append(f"\n(exit code: {code})")
    return "\n".join(parts)


# -- glob / grep ----------------------------------------------------------------------------------

_SKIP_DIRS = {".git", ".svn", ".hg", "node_modules", ".next", "dist", "build"}


def _matches_glob(filename: str, glob: str) -> bool:
    pattern = glob[3:] if glob.startswith("**/") else glob
    source = re.sub(r"[.+^${}()|\[\]\\]", lambda m: "\\" + m[0], pattern).replace("*", ".*").replace("?", ".")
    return re.fullmatch(source, filename, re.IGNORECASE | re.DOTALL) is not None


def _collect(directory: str, glob: Optional[str], max_files: Optional[int] = None) -> List[str]:
    """The files under ``directory`` (depth first, names in byte order as Node's ``readdir``
    gives them to OMA, so that a cap keeps the same files) whose names match ``glob``."""
    found: List[str] = []

    def walk(at: str) -> None:
        try:
            names = sorted(os.listdir(at))
        except OSError:
            return
        for name in names:
            if max_files is not None and len(found) >= max_files:
                return
            path = os.path.join(at, name)
            if os.path.islink(path):
                continue
            if os.path.isdir(path):
                if name not in _SKIP_DIRS:
                    walk(path)
            elif os.path.isfile(path) and (glob is None or _matches_glob(name, glob)):
                found.append(path)

    walk(directory)
    return found


def _relative(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)
    return path if rel == "." else rel


# -- the tools ------------------------------------------------------------------------------------

_BASH: List[_Field] = [
    ("command", "string", False, (), "The bash command to execute."),
    ("timeout", "number", True, (),
     f"Timeout in milliseconds before the command is forcibly killed. Defaults to {DEFAULT_TIMEOUT_MS} ms."),
    ("cwd", "string", True, (), "Working directory in which to run the command."),
]
_READ: List[_Field] = [
    ("path", "string", False, (), "Absolute path to the file to read."),
    ("offset", "number", True, ("int", "nonnegative"),
     "1-based line number to start reading from. When omitted the file is read from the beginning."),
    ("limit", "number", True, ("int", "positive"),
     "Maximum number of lines to return. When omitted all lines from `offset` to the end of the file are returned."),
]
_WRITE: List[_Field] = [
    ("path", "string", False, (), "Absolute path to the file to write. The path must be absolute (starting with /)."),
    ("content", "string", False, (), "The full content to write to the file."),
]
_EDIT: List[_Field] = [
    ("path", "string", False, (), "Absolute path to the file to edit."),
    ("old_string", "string", False, (),
     "The exact string to find and replace. Must match character-for-character including whitespace and newlines."),
    ("new_string", "string", False, (), "The replacement string that will be inserted in place of `old_string`."),
    ("replace_all", "boolean", True, (),
     "When true, replace every occurrence of `old_string` instead of requiring it to be unique. Defaults to false."),
]
_GREP: List[_Field] = [
    ("pattern", "string", False, (), "Regular expression pattern to search for in file contents."),
    ("path", "string", True, (), "Absolute directory or file path to search in. Defaults to the tool working directory."),
    ("glob", "string", True, (),
     'Glob pattern to filter which files are searched (e.g. "*.ts", "**/*.json"). Only used when `path` is a directory.'),
    ("maxResults", "number", True, ("int", "positive"), "Maximum number of matching lines to return. Defaults to 100."),
]
_GLOB: List[_Field] = [
    ("path", "string", True, (), "Absolute directory or file path to list. Defaults to the tool working directory."),
    ("pattern", "string", True, (),
     'Filename glob (e.g. "*.ts", "**/*.json"). When omitted, every file under the directory is listed '
     "(subject to maxFiles and skipped dirs)."),
    ("maxFiles", "number", True, ("int", "positive"), "Maximum number of file paths to return. Defaults to 500."),
]

_DESCRIPTIONS = {
    "bash": "Execute a bash command and return its stdout and stderr. Use this for file system operations, "
            "running scripts, installing packages, and any task that requires shell access. The command runs in "
            "a non-interactive shell (bash -c). Long-running commands should use the timeout parameter.",
    "file_read": "Read the contents of a file from disk. Returns the file contents with line numbers prefixed in "
                 'the format "N\\t<line>". Use `offset` and `limit` to read large files in chunks without loading '
                 "the entire file into the context window.",
    "file_write": "Write content to a file, creating it (and any missing parent directories) if it does not "
                  "already exist, or overwriting it if it does. Prefer this tool for creating new files; use "
                  "file_edit for targeted in-place edits of existing files.",
    "file_edit": "Edit a file by replacing a specific string with new content. The `old_string` must appear "
                 "verbatim in the file. By default the tool errors if `old_string` appears more than once — use "
                 "`replace_all: true` to replace every occurrence. Use file_write when you need to create a new "
                 "file or rewrite it entirely.",
    "grep": "Search for a regular-expression pattern in one or more files. Returns matching lines with their file "
            'paths and 1-based line numbers. Use the `glob` parameter to restrict the search to specific file types '
            '(e.g. "*.ts"). To list matching file paths without reading contents, use the `glob` tool. Results are '
            "capped by `maxResults` to keep the response manageable.",
    "glob": "List file paths under a directory that match an optional filename glob. Does not read file contents "
            "— use `grep` to search inside files. Skips common bulky directories (node_modules, .git, dist, etc.). "
            "Paths in the result are relative to the process working directory. Results are capped by `maxFiles`.",
}


def _make(name: str, fields: Sequence[_Field], body: Callable[[Dict[str, Any]], ToolResult]) -> Tool[Any, Any]:
    def run(value: Any) -> ToolResult:
        given = _check(name, fields, value)
        try:
            return body(given)
        except _Refusal as refusal:
            return _error(str(refusal))

    return Tool(name, _DESCRIPTIONS[name], _schema(fields), run)


def builtin_tools(cwd: Cwd = _DEFAULT) -> List[Tool[Any, Any]]:
    """OMA's six built-in tools, sandboxed to ``cwd`` (default ``<os.getcwd()>/.agent-workspace``;
    ``None``: no sandbox). Pass some or all of them as an agent's ``tools``."""
    box = _Sandbox(cwd)

    def bash(i: Dict[str, Any]) -> ToolResult:
        stdout, stderr, code = _run_bash(i["command"], i.get("cwd"), i.get("timeout", DEFAULT_TIMEOUT_MS))
        return ToolResult(redact_sensitive_text(_render(stdout, stderr, code)), is_error=code != 0)

    def file_read(i: Dict[str, Any]) -> ToolResult:
        path, _ = box.resolve(i["path"])
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError as e:
            return _error(f'Could not read file "{path}": {_reason(e)}')
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        total = len(lines)
        offset = i.get("offset")
        start = max(0, int(offset) - 1) if offset is not None else 0
        if start >= total and total > 0:
            return _error(f'File "{path}" has {_plural(total, "line")} but offset {offset} is beyond the end.')
        limit = i.get("limit")
        end = min(start + int(limit), total) if limit is not None else total
        numbered = "\n".join(f"{start + n + 1}\t{line}" for n, line in enumerate(lines[start:end]))
        note = f"\n\n(showing lines {start + 1}–{end} of {total})" if end < total else ""
        return ToolResult(numbered + note, is_error=False)

    def file_write(i: Dict[str, Any]) -> ToolResult:
        path, _ = box.resolve(i["path"], ensure_root=True)
        existed = os.path.exists(path)
        parent = os.path.dirname(path)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            return _error(f'Failed to create parent directory "{parent}": {_reason(e)}')
        content: str = i["content"]
        try:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(content)
        except OSError as e:
            return _error(f'Failed to write file "{path}": {_reason(e)}')
        lines = len(content.split("\n"))
        size = len(content.encode("utf-8"))
        return ToolResult(f'{"Updated" if existed else "Created"} "{path}" ({_plural(lines, "line")}, {size} bytes).', is_error=False)

    def file_edit(i: Dict[str, Any]) -> ToolResult:
        path, _ = box.resolve(i["path"])
        try:
            with open(path, "rb") as f:
                original = f.read().decode("utf-8", "replace")
        except OSError as e:
            return _error(f'Could not read "{path}": {_reason(e)}')
        old, new = i["old_string"], i["new_string"]
        count = original.count(old) if old else 0
        if count == 0:
            return _error(f'The string to replace was not found in "{path}".\n'
                          "Make sure `old_string` matches the file contents exactly, including indentation and line "
                          "endings.")
        replace_all = bool(i.get("replace_all", False))
        if count > 1 and not replace_all:
            return _error(f'`old_string` appears {count} times in "{path}". Provide a more specific string to '
                          "uniquely identify the section you want to replace, or set `replace_all: true` to replace "
                          "every occurrence.")
        updated = original.replace(old, new) if replace_all else original.replace(old, new, 1)
        try:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(updated)
        except OSError as e:
            return _error(f'Failed to write "{path}": {_reason(e)}')
        replaced = count if replace_all else 1
        return ToolResult(f'Replaced {_plural(replaced, "occurrence")} in "{path}".', is_error=False)

    def glob(i: Dict[str, Any]) -> ToolResult:
        root, real_root = box.resolve(i.get("path") or box.default_dir())
        max_files = int(i.get("maxFiles", 500))
        pattern = i.get("pattern")
        capped = False
        try:
            if os.path.isfile(root):
                if pattern is not None and not _matches_glob(os.path.basename(root), pattern):
                    return ToolResult("No files matched.", is_error=False)
                paths = [_relative(root, real_root)]
            else:
                os.stat(root)
                files = _collect(root, pattern, max_files + 1)
                capped = len(files) > max_files
                paths = [_relative(f, real_root) for f in files[:max_files]]
        except OSError as e:
            return _error(f'Cannot access path "{root}": {_reason(e)}')
        if not paths:
            return ToolResult("No files matched.", is_error=False)
        note = f"\n\n(listing capped at {max_files} paths; raise maxFiles for more)" if capped else ""
        return ToolResult("\n".join(sorted(paths, key=str.lower)) + note, is_error=False)

    def grep(i: Dict[str, Any]) -> ToolResult:
        path, real_root = box.resolve(i.get("path") or box.default_dir())
        max_results = int(i.get("maxResults", 100))
        try:
            regex = re.compile(i["pattern"])
        except re.error:
            return _error(f'Invalid regular expression: "{i["pattern"]}"')
        if shutil.which("rg"):
            return _ripgrep(i["pattern"], path, i.get("glob"), max_results, real_root)
        try:
            files = [path] if os.path.isfile(path) else (os.stat(path) and _collect(path, i.get("glob")))
        except OSError as e:
            return _error(f'Cannot access path "{path}": {_reason(e)}')
        hits: List[str] = []
        for file in files:
            if len(hits) >= max_results:
                break
            try:
                with open(file, "rb") as f:
                    lines = f.read().decode("utf-8", "replace").split("\n")
            except OSError:
                continue
            for n, line in enumerate(lines):
                if len(hits) >= max_results:
                    break
                if regex.search(line):
                    hits.append(f"{_relative(file, real_root)}:{n + 1}:{line}")
        if not hits:
            return ToolResult("No matches found.", is_error=False)
        note = (f"\n\n(results capped at {max_results}; use maxResults to raise the limit)"
                if len(hits) >= max_results else "")
        return ToolResult("\n".join(hits) + note, is_error=False)

    return [_make("bash", _BASH, bash), _make("file_read", _READ, file_read), _make("file_write", _WRITE, file_write),
            _make("file_edit", _EDIT, file_edit), _make("grep", _GREP, grep), _make("glob", _GLOB, glob)]


def _ripgrep(pattern: str, path: str, glob: Optional[str], max_results: int, root: str) -> ToolResult:
    args = ["rg", "--line-number", "--no-heading", "--color=never", f"--max-count={max_results}"]
    if glob is not None:
        args += ["--glob", glob]
    args += ["--", pattern, _relative(path, root) if path != root else "."]
    try:
        done = subprocess.run(args, cwd=root, capture_output=True, check=False)
    except OSError:
        return _error("ripgrep process error — run may be retried with the Node.js fallback.")
    if done.returncode not in (0, 1):
        return _error(f"ripgrep failed (exit {done.returncode}): {done.stderr.decode('utf-8', 'replace').strip()}")
    text = done.stdout.decode("utf-8", "replace").rstrip()
    return ToolResult(text if text else "No matches found.", is_error=False)
