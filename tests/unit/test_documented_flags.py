"""Every command and flag the docs show exists: each `zm-roi COMMAND … --flag` written in code in
README.md, bench/README.md and docs/*.md (the guides; the decisions' dated lab notes may name what
was) is a subcommand argparse knows, and each flag after it one that subcommand accepts."""

from __future__ import annotations

import re

from tests.conftest import ROOT
from tests.support import cli_subcommands

GUIDES = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)
# A command: `zm-roi` as a word (not `zm-roi://…`, not the prose "the zm-roi schema"), its subcommand,
# and the rest of the command up to a separator or the end of the line (a `|` stays: in a usage line it
# separates alternatives).
COMMAND = re.compile(r"(?<![\w-])(?<!the )zm-roi\s+([a-z][a-z-]*)([^\n`;&]*)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def documented_commands(text: str) -> list[tuple[str, list[str], str]]:
    """(subcommand, flags, the line) of every zm-roi command in the code of a Markdown text; a shell
    line continued with a backslash is read as one."""
    found = []
    for code in CODE.finditer(text):
        for line in code.group(0).replace("\\\n", " ").splitlines():
            for command in COMMAND.finditer(line):
                found.append((command.group(1), FLAG.findall(command.group(2)), line.strip().strip("`")))
    return found


def known_options() -> dict[str, set[str]]:
    return {
        name: {option for action in subparser._actions for option in action.option_strings}
        for name, subparser in cli_subcommands().items()
    }


def unknown(text: str) -> list[str]:
    options = known_options()
    wrong = []
    for command, flags, line in documented_commands(text):
        if command not in options:
            wrong.append(f"no command `zm-roi {command}` ({line})")
            continue
        wrong += [f"`zm-roi {command}` has no {flag} ({line})" for flag in flags if flag not in options[command]]
    return wrong


def test_every_documented_command_and_flag_exists():
    seen = [(path, documented_commands(path.read_text())) for path in GUIDES]
    flags = {(command, flag) for _, commands in seen for command, found, _ in commands for flag in found}
    assert {("gate", "--min-rate"), ("judge-check", "--record"), ("import", "--project")} <= flags, (
        "the scan reads the commands the guides show"
    )
    wrong = [f"{path.relative_to(ROOT)}: {problem}" for path in GUIDES for problem in unknown(path.read_text())]
    assert not wrong, "the docs show what the CLI does not have:\n" + "\n".join(wrong)


def test_a_flag_or_command_the_cli_lacks_is_found():
    text = (
        "Run `zm-roi gate --min-rate 0.5 --max-regress 2`, then\n"
        "```sh\nzm-roi judge-check --model m \\\n  --recrd\nzm-roi publish --all\n```\n"
        "The error `the zm-roi schema is missing` is prose."
    )
    assert unknown(text) == [
        "`zm-roi gate` has no --max-regress (zm-roi gate --min-rate 0.5 --max-regress 2)",
        "`zm-roi judge-check` has no --recrd (zm-roi judge-check --model m    --recrd)",
        "no command `zm-roi publish` (zm-roi publish --all)",
    ]
