"""Deterministic episode summaries: one session's working-layer observations turned into one episodic draft.

An observation is a ``Memory`` written by an agent hook. Tool calls carry metadata such as
``{"tool_name": "Bash", "tool_input": {...}, "tool_response": ..., "event": "PostToolUse"}`` and content
``"Bash: <input summary> -> <output summary>"``; user prompts carry ``{"event": "prompt"}``. Every reader here
tolerates missing or oddly shaped metadata and falls back to the content text, because observations come from many
agents and hook versions.

Nothing here touches SQLite: the functions return drafts and the store decides what to write.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlens.models import Memory

#: Events that mark an observation as a user prompt (memlens' own name and Claude Code's hook name).
PROMPT_EVENTS = frozenset({"prompt", "userpromptsubmit", "user_prompt"})

#: Tools whose input is a shell command; their step name includes the command verb ("Bash: pytest").
SHELL_TOOLS = frozenset({"bash", "shell", "sh", "terminal", "run_terminal_cmd", "exec_command", "run_command"})

#: Tools that change the files they name; the other tools only read them.
WRITE_TOOLS = frozenset({"edit", "write", "multiedit", "notebookedit", "str_replace_editor", "apply_patch"})

#: Labels of the lines that ``summarize_session`` writes from structure rather than from what was said. Knowledge
#: extraction skips these lines, or every episode would "recur" as "Tools: Bash (3)".
STRUCTURAL_LABELS: tuple[str, ...] = ("Session ", "Tools:", "Files changed:", "Files referenced:")

_PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "filename", "target_file")
_PATH_LIST_KEYS = ("paths", "files", "file_paths")
_RESPONSE_TEXT_KEYS = ("stdout", "stderr", "output", "error", "result", "content", "message")
_EXIT_KEYS = ("exit_code", "exitCode", "returncode", "return_code", "status_code")

# Commands whose first argument names what they do ("git commit" says more than "git").
_SUBCOMMAND_TOOLS = frozenset(
    {"git", "npm", "pnpm", "yarn", "cargo", "go", "docker", "kubectl", "pip", "uv", "poetry", "gh", "dotnet", "bun", "terraform", "helm"}
)
# Prefixes that only wrap the real command.
_COMMAND_WRAPPERS = frozenset({"sudo", "time", "env", "nohup", "exec", "command", "xargs"})
# Environment managers whose "run"/"exec" only starts the real program.
_RUNNERS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch"})
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?")
_NAVIGATION_COMMANDS = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "true"})

#: Tools whose output is file or web content rather than a status: only an explicit error flag or exit code marks
#: their call as failed, or reading a file that mentions "error:" would count as an error.
CONTENT_TOOLS = WRITE_TOOLS | {"read", "grep", "glob", "ls", "webfetch", "websearch", "notebookread", "view", "task"}

#: Tool names recognised in bare "Tool: input" content without metadata.
KNOWN_TOOLS = SHELL_TOOLS | CONTENT_TOOLS

_EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)\b(?::|$)", re.MULTILINE)
_ERROR_PATTERNS = (
    re.compile(r"Traceback \(most recent call last\)"),
    _EXCEPTION_LINE,
    re.compile(r"\b(?:error|fatal|panic)(?:\[\w+\])?:", re.IGNORECASE),
    re.compile(r"\bexit(?:ed)?(?: with)? (?:code|status)[: ]+[1-9]\d*", re.IGNORECASE),
    re.compile(r"\b(?:command not found|No such file or directory|Permission denied|Segmentation fault)\b"),
    re.compile(r"^FAILED\b|\b[1-9]\d* failed\b", re.MULTILINE),
    re.compile(r"^npm ERR!", re.MULTILINE),
)

_DECISION_CUE = re.compile(
    r"\b(?:decid(?:e|ed|es|ing)|decision|chose|choose|chosen|will use|won't use|going to use|going with|"
    r"switch(?:ed|ing)? (?:to|from|over)|opt(?:ed)? for|settled on|instead of|let's use|we'll use|use .+ instead)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_PATH_TOKEN = re.compile(r"^[\w.~/@+-]+$")
_FILE_SUFFIX = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")

_MAX_PROMPTS = 10
_MAX_ERRORS = 10
_MAX_DECISIONS = 10
_MAX_LINE = 240
_MAX_PROMPT = 400
_MAX_TITLE = 80


@dataclass(frozen=True)
class EpisodeDraft:
    """A proposed episodic memory (type ``summary``) for one session; the store decides whether to write it.

    ``metadata`` is JSON-ready: ``tools`` (name -> count), ``files``, ``files_changed``, ``errors``, ``decisions``,
    ``prompts``, ``session_id``, ``project``, ``started_at``/``ended_at`` (ISO 8601), ``observation_count`` and
    ``summarizer`` ("rules" or "llm").
    """

    title: str
    content: str
    tags: tuple[str, ...]
    source_ids: tuple[int, ...]
    importance: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ObservationView:
    """What one observation says, read defensively from its metadata and content.

    ``kind`` is ``"prompt"`` (the user asked something), ``"tool"`` (a tool call) or ``"note"`` (anything else).
    """

    memory_id: int
    kind: str
    text: str
    tool: str | None = None
    tool_input: Mapping[str, Any] = field(default_factory=dict)
    output: str = ""
    exit_code: int | None = None
    reported_error: bool = False


def read_observation(memory: Memory) -> ObservationView:
    """Classify one observation and pull out its tool, input, output and text, never raising on odd metadata."""
    meta = memory.metadata if isinstance(memory.metadata, Mapping) else {}
    content = memory.content or ""
    event = str(meta.get("event") or "").strip().lower()
    if event in PROMPT_EVENTS:
        # The hook keeps the prompt as the content; ``observe`` keeps it as the tool input (content "prompt: ...").
        prompt = meta.get("prompt")
        if not (isinstance(prompt, str) and prompt.strip()):
            prompt = meta.get("tool_input")
        text = prompt if isinstance(prompt, str) and prompt.strip() else content
        return ObservationView(memory.id, "prompt", _one_line(text))

    tool = meta.get("tool_name") or meta.get("tool")
    raw_input = meta.get("tool_input")
    tool_input: Mapping[str, Any] = raw_input if isinstance(raw_input, Mapping) else {}
    if isinstance(tool, str) and tool.strip():
        response = meta.get("tool_response", meta.get("tool_output"))
        output, exit_code, reported_error = _read_response(response)
        if not output:
            output = _content_output(content)
        return ObservationView(memory.id, "tool", content, tool.strip(), tool_input, output, exit_code, reported_error)

    # No usable metadata: an observation whose content reads "Tool: input -> output" is still a tool call. A bare
    # "Name: text" is one only for a known tool: otherwise every chat turn ("Caroline: hi") would be a "tool call".
    parsed = _parse_tool_content(content) if memory.type == "observation" else None
    if parsed is not None and (" -> " in content or parsed[0].lower() in KNOWN_TOOLS):
        name, summary, output = parsed
        guessed_input = {"command": summary} if name.lower() in SHELL_TOOLS else {}
        return ObservationView(memory.id, "tool", content, name, guessed_input, output)
    return ObservationView(memory.id, "note", content)


def step_name(view: ObservationView) -> str | None:
    """The normalised workflow step of a tool call ("Edit", "Bash: pytest", "Bash: git commit"), None otherwise."""
    if view.kind != "tool" or not view.tool:
        return None
    if view.tool.lower() in SHELL_TOOLS:
        command = view.tool_input.get("command") or view.tool_input.get("cmd")
        verb = command_verb(command) if isinstance(command, str) else None
        if verb:
            return f"{view.tool}: {verb}"
    return view.tool


def command_verb(command: str) -> str | None:
    """The program a shell command runs, with its subcommand for git-like tools ("pytest", "git commit").

    Leading ``cd``/``export`` segments, environment assignments, wrappers such as ``sudo``, ``uv run`` and
    ``python -m`` are skipped, and paths are reduced to their base name (``.venv/bin/pytest`` -> ``pytest``).
    """
    segments = _program_segments(command)
    if not segments:
        return None
    program, *args = segments[0]
    program = os.path.basename(program) or program
    words = [a for a in args if not a.startswith("-")]
    if program in _SUBCOMMAND_TOOLS and words:
        # "npm run build" and "npm run test" are different steps; the script name is what tells them apart.
        if words[0] == "run" and len(words) > 1 and program in {"npm", "pnpm", "yarn", "bun"}:
            return f"{program} run {words[1]}"
        return f"{program} {words[0]}"
    return program


def _program_segments(command: str) -> list[list[str]]:
    """The token lists of the programs a shell line runs, wrappers removed, ``cd``-like segments left out."""
    segments = []
    for segment in re.split(r"&&|\|\||;|\|", command):
        tokens = _unwrap(_split_command(segment))
        if tokens and tokens[0] not in _NAVIGATION_COMMANDS:
            segments.append(tokens)
    return segments


def _unwrap(tokens: list[str]) -> list[str]:
    while tokens:
        head = os.path.basename(tokens[0])
        if _ENV_ASSIGNMENT.match(tokens[0]) or head in _COMMAND_WRAPPERS:
            tokens = tokens[1:]
        elif head in _RUNNERS and len(tokens) > 2 and tokens[1] in ("run", "exec"):
            tokens = tokens[2:]
        elif head in ("npx", "pnpx", "bunx"):
            tokens = tokens[1:]
        elif _PYTHON.fullmatch(head) and len(tokens) > 2 and tokens[1] == "-m":
            tokens = tokens[2:]
        else:
            break
    return tokens


def summarize_session(observations: Sequence[Memory]) -> EpisodeDraft:
    """Summarise one session's observations into an episode draft, deterministically.

    Observations are taken in time order (``created_at``, then id). The draft names what the user asked, the tools
    used with their counts, the files touched (those changed, then the others), the errors seen and the decisions
    stated; ``source_ids`` are all observation ids in time order. Raises ``ValueError`` for an empty sequence.
    """
    if not observations:
        raise ValueError("summarize_session needs at least one observation")
    ordered = sorted(observations, key=lambda m: (m.created_at, m.id))
    views = [read_observation(m) for m in ordered]

    prompts = _unique([clip_text(v.text, _MAX_PROMPT) for v in views if v.kind == "prompt" and v.text])[:_MAX_PROMPTS]
    tools = Counter(v.tool for v in views if v.kind == "tool" and v.tool)
    files, files_changed = _files_touched(views)
    errors = _unique([e for v in views if (e := error_line(v))])[:_MAX_ERRORS]
    decisions = _unique([s for v in views for s in _decision_sentences(v)])[:_MAX_DECISIONS]
    tool_counts = dict(sorted(tools.items(), key=lambda item: (-item[1], item[0])))

    session_id = next((m.session_id for m in ordered if m.session_id), None)
    project = next((m.project for m in ordered if m.project), None)
    started, ended = ordered[0].created_at, ordered[-1].created_at
    title = _title(prompts, tool_counts, files_changed or files, session_id)

    header = (
        f"Session {session_id or '(no id)'}: {started:%Y-%m-%d %H:%M} to {ended:%H:%M} UTC, {len(ordered)} observations"
    )
    lines = [header]
    lines += _section("Asked:", prompts)
    if tool_counts:
        lines.append("Tools: " + ", ".join(f"{name} ({count})" for name, count in tool_counts.items()))
    if files_changed:
        lines.append("Files changed: " + ", ".join(files_changed))
    read_only = [f for f in files if f not in files_changed]
    if read_only:
        lines.append("Files referenced: " + ", ".join(read_only))
    lines += _section("Errors:", errors)
    lines += _section("Decisions:", decisions)

    tags = {name.lower() for name in tool_counts}
    tags |= {"error"} if errors else set()
    tags |= {"decision"} if decisions else set()
    return EpisodeDraft(
        title=title,
        content="\n".join(lines),
        tags=("session", *sorted(tags)),
        source_ids=tuple(m.id for m in ordered),
        importance=_importance(len(ordered), bool(errors), bool(decisions), bool(files_changed)),
        metadata={
            "tools": tool_counts,
            "files": files,
            "files_changed": files_changed,
            "errors": errors,
            "decisions": decisions,
            "prompts": prompts,
            "session_id": session_id,
            "project": project,
            "started_at": started.isoformat(),
            "ended_at": ended.isoformat(),
            "observation_count": len(ordered),
            "summarizer": "rules",
        },
    )


def _importance(count: int, has_errors: bool, has_decisions: bool, has_changes: bool) -> float:
    # Decisions and errors are what a later session most wants to recall; a long session matters somewhat more.
    score = 0.3 + 0.2 * has_decisions + 0.15 * has_errors + 0.15 * has_changes + 0.2 * min(1.0, count / 50)
    return round(min(1.0, score), 3)


def _title(prompts: list[str], tools: dict[str, int], files: list[str], session_id: str | None) -> str:
    if prompts:
        first = _SENTENCE_END.split(prompts[0].strip(), maxsplit=1)[0]
        return clip_text(first, _MAX_TITLE)
    if files:
        return clip_text("Worked on " + ", ".join(os.path.basename(f) for f in files[:3]), _MAX_TITLE)
    if tools:
        return clip_text("Session using " + ", ".join(list(tools)[:3]), _MAX_TITLE)
    return f"Session {session_id}" if session_id else "Session notes"


def _section(label: str, items: list[str]) -> list[str]:
    return [label, *(f"- {item}" for item in items)] if items else []


def _files_touched(views: list[ObservationView]) -> tuple[list[str], list[str]]:
    files: list[str] = []
    changed: list[str] = []
    for view in views:
        if view.kind != "tool":
            continue
        paths = _paths_in_input(view.tool_input)
        files.extend(paths)
        if view.tool and view.tool.lower() in WRITE_TOOLS:
            changed.extend(paths)
    return _unique(files), _unique(changed)


def _paths_in_input(tool_input: Mapping[str, Any]) -> list[str]:
    paths = [v.strip() for k in _PATH_KEYS if isinstance(v := tool_input.get(k), str) and v.strip()]
    for key in _PATH_LIST_KEYS:
        value = tool_input.get(key)
        if isinstance(value, list):
            paths += [p.strip() for p in value if isinstance(p, str) and p.strip()]
    for key in ("command", "cmd"):
        command = tool_input.get(key)
        if isinstance(command, str):
            paths += [t for tokens in _program_segments(command) for t in tokens[1:] if _looks_like_path(t)]
    return paths


def _looks_like_path(token: str) -> bool:
    if token.startswith("-") or "://" in token or not _PATH_TOKEN.match(token):
        return False
    if re.fullmatch(r"[\d.]+", token):  # version numbers such as 3.11
        return False
    return "/" in token or bool(_FILE_SUFFIX.search(token))


def _split_command(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:  # unbalanced quotes in a half-typed command
        return command.split()


def _read_response(response: Any) -> tuple[str, int | None, bool]:
    """Output text, exit code and explicit error flag from a tool response of any shape."""
    if isinstance(response, str):
        return response, None, False
    if isinstance(response, Mapping):
        parts = [str(response[k]) for k in _RESPONSE_TEXT_KEYS if isinstance(response.get(k), (str, int, float))]
        exit_code = next(
            (code for k in _EXIT_KEYS if isinstance(code := response.get(k), int) and not isinstance(code, bool)),
            None,
        )
        flagged = response.get("is_error") is True or response.get("success") is False
        if isinstance(response.get("error"), str) and response["error"].strip():
            flagged = True
        return "\n".join(p for p in parts if p), exit_code, flagged
    if isinstance(response, list):
        texts = [item.get("text") if isinstance(item, Mapping) else item for item in response]
        return "\n".join(t for t in texts if isinstance(t, str)), None, False
    return "", None, False


def error_line(view: ObservationView) -> str | None:
    """A one-line description of the error a tool call ran into, or None when it looks fine."""
    if view.kind != "tool":
        return None
    output = view.output or ""
    scan_output = not view.tool or view.tool.lower() not in CONTENT_TOOLS
    found = _first_error_line(output) if scan_output else None
    if found is None and view.exit_code not in (None, 0):
        found = f"exit code {view.exit_code}"
    if found is None and view.reported_error:
        found = _first_line(output) or "reported an error"
    if found is None:
        return None
    return clip_text(f"{step_name(view) or view.tool}: {found}", _MAX_LINE)


def _first_error_line(output: str) -> str | None:
    if not any(p.search(output) for p in _ERROR_PATTERNS):
        return None
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    # A traceback's last line names the exception, which says more than the "Traceback" header.
    if "Traceback (most recent call last)" in output:
        exception_lines = [line for line in lines if _EXCEPTION_LINE.match(line)]
        if exception_lines:
            return exception_lines[-1]
    for line in lines:
        if any(p.search(line) for p in _ERROR_PATTERNS):
            return line
    return lines[0] if lines else None


def _decision_sentences(view: ObservationView) -> list[str]:
    """Sentences that state a decision; tool outputs are not read (file contents would flood this)."""
    if view.kind == "tool":
        parts = [view.text.split(" -> ", 1)[0]]
        description = view.tool_input.get("description")
        if isinstance(description, str):
            parts.append(description)
        text = "\n".join(parts)
    else:
        text = view.text
    sentences = (s.strip(" -*\t") for s in _SENTENCE_END.split(text))
    return [clip_text(s, _MAX_LINE) for s in sentences if s and _DECISION_CUE.search(s)]


def _parse_tool_content(content: str) -> tuple[str, str, str] | None:
    match = re.match(r"^([A-Za-z_][\w.-]{0,63}): (.*)$", content.strip(), re.DOTALL)
    if match is None:
        return None
    summary, _, output = match.group(2).partition(" -> ")
    return match.group(1), summary.strip(), output.strip()


def _content_output(content: str) -> str:
    return content.partition(" -> ")[2].strip()


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def clip_text(text: str, limit: int, *, keep_lines: bool = False) -> str:
    """``text`` with whitespace collapsed to single spaces (or only trimmed, with ``keep_lines``) and, when longer
    than ``limit`` characters, cut at a word boundary and ended with "..." so the result fits in ``limit``."""
    text = text.strip() if keep_lines else _one_line(text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 3].rsplit(" ", 1)[0]
    return (cut or text[: limit - 3]) + "..."


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
