"""What a user types is trimmed, normalised and length-checked in one place (zm_roi/inputs.py), before
any SQL: every text option of every command has its normaliser there, and the normalisers do what
they say. The same inputs end to end (import with one spelling, recall with another) are in
tests/e2e/test_cli_inputs.py."""

from __future__ import annotations

import argparse
import unicodedata

import pytest

from tests.support import cli_subcommands
from zm_roi import cli, inputs
from zm_roi.errors import UserError


def text_options() -> set[tuple[str, str]]:
    """(command, dest) of every option or positional that takes free text: a value, no type, no choices."""
    found = set()
    for command, parser in cli_subcommands().items():
        for action in parser._actions:
            takes_value = action.nargs != 0 and not isinstance(action, argparse._HelpAction)
            if takes_value and action.type is None and action.choices is None:
                found.add((command, action.dest))
    return found


def test_every_text_option_of_every_command_has_its_normaliser():
    options = text_options()
    assert {("recall", "question"), ("import", "file"), ("dashboard", "out")} <= options, "the scan finds them"
    missing = sorted(f"zm-roi {command}: {dest}" for command, dest in options if dest not in inputs.ARGUMENTS)
    assert not missing, f"text options that reach SQL without zm_roi/inputs.py: {missing}"


def test_every_number_is_parsed_by_a_range_checked_type():
    for command, parser in cli_subcommands().items():
        for action in parser._actions:
            if action.type is not None:
                assert action.type.__module__ == "zm_roi.inputs", f"zm-roi {command} {action.dest}: {action.type}"


def test_clean_runs_on_the_parsed_command_line_before_any_command(monkeypatch):
    seen = {}
    monkeypatch.setattr(cli, "cmd_recall", lambda args, config: seen.update(vars(args)))
    decomposed = unicodedata.normalize("NFD", "  Café Zürich ")
    assert cli.main(["recall", decomposed, "--user", " Ann@Example.COM ", "--project", decomposed]) == 0
    assert seen["question"] == seen["project"] == "Café Zürich"
    assert unicodedata.is_normalized("NFC", seen["project"]), "NFC: the precomposed é, whichever way it was typed"
    assert seen["user"] == "ann@example.com"


@pytest.mark.parametrize(
    ("dest", "typed", "stored"),
    [
        ("user", " İlker@Example.test ", "i̇lker@example.test"),
        ("project", unicodedata.normalize("NFD", " Ångström "), "Ångström"),
        ("team", "\tplatform\n", "platform"),
        ("question", unicodedata.normalize("NFD", " où est-il ? "), "où est-il ?"),
        ("model", " openai/gpt-4o-mini ", "openai/gpt-4o-mini"),
        ("recall_function", " public.recall ", "public.recall"),
        ("provider", " openai ", "openai"),
        ("file", " a.jsonl", " a.jsonl"),
        ("out", "tile.html ", "tile.html "),
    ],
)
def test_each_normaliser_trims_and_composes_text_and_keeps_paths_as_typed(dest, typed, stored):
    assert inputs.ARGUMENTS[dest](typed) == stored


@pytest.mark.parametrize(
    ("dest", "length", "message"),
    [
        ("user", 300, "an address has at most 254"),
        ("project", 201, "--project has 201 characters; a name has at most 200"),
        ("team", 201, "--team has 201 characters; a name has at most 200"),
        ("question", 2001, "ask in at most 2,000"),
        ("model", 201, "--model has 201 characters; it may have at most 200"),
        ("recall_function", 201, "--recall-function has 201 characters"),
        ("provider", 101, "--provider has 101 characters"),
        ("out", 5000, "--out is longer than a path may be"),
        ("file", 5000, "the file is longer than a path may be"),
    ],
)
def test_each_normaliser_refuses_a_value_over_its_limit(dest, length, message):
    value = "x" * (length - len("@example.test")) + "@example.test" if dest == "user" else "x" * length
    with pytest.raises(UserError, match=message.replace("?", r"\?")):
        inputs.ARGUMENTS[dest](value)


@pytest.mark.parametrize("dest", sorted(inputs.ARGUMENTS))
def test_each_normaliser_refuses_a_blank_and_a_nul(dest):
    with pytest.raises(UserError):
        inputs.ARGUMENTS[dest]("  \t ")
    with pytest.raises(UserError):
        inputs.ARGUMENTS[dest]("a\x00b@example.test")
