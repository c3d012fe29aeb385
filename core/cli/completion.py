"""``memlens completion bash|zsh|fish``: a shell completion script generated from the parser itself.

The script lists the subcommands, each one's options and the values of options with fixed choices, so it stays
right as commands change (regenerate it after upgrading memlens). No completion library is needed: argcomplete
would complete dynamically by running memlens on every Tab, which is slower and needs a hook in the script anyway.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from memlens.cli.common import add_command

SHELLS = ("bash", "zsh", "fish")


def register(sub: Any) -> None:
    """Add the ``completion`` subcommand."""
    p = add_command(
        sub,
        "completion",
        cmd_completion,
        help="print a shell completion script for bash, zsh or fish",
        description=(
            "Print a completion script generated from memlens's own options. "
            "bash: memlens completion bash > ~/.local/share/bash-completion/completions/memlens; "
            "zsh: memlens completion zsh > ~/.zfunc/_memlens (with ~/.zfunc in $fpath before compinit); "
            "fish: memlens completion fish > ~/.config/fish/completions/memlens.fish."
        ),
        clock=False,
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in: bash, zsh or fish")


def cmd_completion(args: argparse.Namespace) -> int:
    from memlens.cli import build_parser

    commands = describe_parser(build_parser())
    print({"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell](commands), end="")
    return 0


# --- what the parser offers ---------------------------------------------------------------------------------------


@dataclass
class Option:
    """One option of a command: its spellings, help, whether it takes a value and the values it accepts."""

    flags: list[str]
    help: str
    takes_value: bool
    choices: list[str] = field(default_factory=list)
    is_path: bool = False


@dataclass
class Command:
    """A subcommand (name "" for the top level) and its options."""

    name: str
    help: str
    options: list[Option]
    positional_choices: list[str] = field(default_factory=list)


def _options(parser: argparse.ArgumentParser) -> tuple[list[Option], list[str]]:
    options: list[Option] = []
    positional_choices: list[str] = []
    for action in parser._actions:  # argparse has no public way to list a parser's options
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        choices = [str(c) for c in action.choices] if action.choices else []
        if not action.option_strings:
            positional_choices += choices
            continue
        help_text = "" if action.help in (None, argparse.SUPPRESS) else str(action.help)
        options.append(
            Option(
                list(action.option_strings),
                help_text.split(" (")[0],
                action.nargs != 0,
                choices,
                is_path=action.metavar in ("PATH", "FILE"),
            )
        )
    return options, positional_choices


def describe_parser(parser: argparse.ArgumentParser) -> list[Command]:
    """The top level (first, named "") and every subcommand, sorted by name."""
    top_options, _ = _options(parser)
    commands = [Command("", parser.description or "", top_options)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in sorted(action.choices.items()):
                options, positional = _options(sub)
                commands.append(Command(name, helps.get(name, ""), options, positional))
    return commands


# --- the scripts ---------------------------------------------------------------------------------------------------


def _words(items: list[str]) -> str:
    return " ".join(items)


def bash_script(commands: list[Command]) -> str:
    """A bash completion function for ``memlens`` (also used by zsh's bashcompinit, but see :func:`zsh_script`)."""
    top, subs = commands[0], commands[1:]
    top_flags = [f for o in top.options for f in o.flags]
    top_valued = [f for o in top.options if o.takes_value for f in o.flags]
    cases = []
    for c in subs:
        flags = [f for o in c.options for f in o.flags]
        words = _words(flags + c.positional_choices)
        choice_cases = "".join(
            f"                {'|'.join(o.flags)}) COMPREPLY=($(compgen -W \"{_words(o.choices)}\" -- \"$cur\")); return ;;\n"
            for o in c.options
            if o.choices
        )
        cases.append(
            f"        {c.name})\n"
            f"            case $prev in\n{choice_cases}"
            f"                {'|'.join(f for o in c.options if o.takes_value and not o.choices for f in o.flags) or '--db'}) return ;;\n"
            f"            esac\n"
            f'            COMPREPLY=($(compgen -W "{words}" -- "$cur")) ;;'
        )
    case_text = "\n".join(cases)
    return f"""# bash completion for memlens (generated by `memlens completion bash`)
_memlens() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} cmd="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${{COMP_WORDS[i]}} in
            {'|'.join(top_valued)}) ((i++)) ;;
            -*) ;;
            *) cmd=${{COMP_WORDS[i]}}; break ;;
        esac
    done
    COMPREPLY=()
    if [[ -z $cmd ]]; then
        case $prev in {'|'.join(top_valued)}) return ;; esac
        COMPREPLY=($(compgen -W "{_words(top_flags + [c.name for c in subs])}" -- "$cur"))
        return
    fi
    case $cmd in
{case_text}
    esac
}}
complete -o default -F _memlens memlens
"""


def _zsh_escape(text: str) -> str:
    # Inside '...' in an _arguments spec: brackets end the description and colons separate fields.
    return text.replace("'", "'\\''").replace("[", "(").replace("]", ")").replace(":", "\\:")


def _zsh_spec(o: Option) -> str:
    names = o.flags[0] if len(o.flags) == 1 else "{" + ",".join(o.flags) + "}"
    exclusive = f"'({' '.join(o.flags)})'" if len(o.flags) > 1 else ""
    desc = f"[{_zsh_escape(o.help)}]"
    if not o.takes_value:
        return f"{exclusive}{names}'{desc}'"
    action = f"({' '.join(o.choices)})" if o.choices else ("_files" if o.is_path else " ")
    return f"{exclusive}{names}'{desc}:value:{action}'"


def zsh_script(commands: list[Command]) -> str:
    """A native zsh completion function (``#compdef memlens``) using ``_arguments``."""
    top, subs = commands[0], commands[1:]
    listing = "\n".join(f"        '{c.name}:{_zsh_escape(c.help)}'" for c in subs)
    cases = []
    for c in subs:
        specs = " \\\n                ".join([_zsh_spec(o) for o in c.options] + (["'1:value:(" + " ".join(c.positional_choices) + ")'"] if c.positional_choices else ["'*:file:_files'"]))
        cases.append(f"            {c.name})\n                _arguments {specs} ;;")
    top_specs = " \\\n        ".join(_zsh_spec(o) for o in top.options)
    return f"""#compdef memlens
# zsh completion for memlens (generated by `memlens completion zsh`)
_memlens() {{
    local curcontext="$curcontext" state line
    local -a commands
    commands=(
{listing}
    )
    _arguments -C \\
        {top_specs} \\
        '1:command:->command' \\
        '*::argument:->argument'
    case $state in
        command) _describe -t commands 'memlens command' commands ;;
        argument)
            case $line[1] in
{chr(10).join(cases)}
            esac ;;
    esac
}}
_memlens "$@"
"""


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_option(o: Option, condition: str) -> str:
    parts = [f"complete -c memlens -n {_fish_quote(condition)}"]
    for flag in o.flags:
        parts.append(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}")
    if o.takes_value:
        parts.append("-r" if o.is_path else "-x")
    if o.choices:
        parts.append(f"-a {_fish_quote(' '.join(o.choices))}")
    if o.help:
        parts.append(f"-d {_fish_quote(o.help)}")
    return " ".join(parts)


def fish_script(commands: list[Command]) -> str:
    """fish ``complete`` lines: the subcommands, then each command's options."""
    top, subs = commands[0], commands[1:]
    lines = ["# fish completion for memlens (generated by `memlens completion fish`)"]
    lines += [_fish_option(o, "__fish_use_subcommand") for o in top.options]
    lines += [f"complete -c memlens -n __fish_use_subcommand -a {c.name} -d {_fish_quote(c.help)}" for c in subs]
    for c in subs:
        condition = f"__fish_seen_subcommand_from {c.name}"
        lines += [_fish_option(o, condition) for o in c.options]
        if c.positional_choices:
            lines.append(f"complete -c memlens -n {_fish_quote(condition)} -a {_fish_quote(' '.join(c.positional_choices))}")
    return "\n".join(lines) + "\n"
