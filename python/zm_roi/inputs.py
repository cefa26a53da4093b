"""The one place where what a user types is made ready for SQL: trimmed, normalised and length-checked.

`clean(args)` runs on every parsed command line (cli.main, before any command runs), and applies the
normaliser `ARGUMENTS` names for each option that takes text; tests/unit/test_inputs.py fails when a
command gains a text option missing from that table. Numbers are parsed and range-checked by the
argparse types at the bottom (`bounded_int`, `bounded_float`, `cap_usd`). The library paths the demo
and the tests call (importer, recall, schedule, keys) pass emails and names through the same
functions, so one spelling finds what another created. The MCP tools take no input: the user is the
token's.

What each normaliser does:
- text (questions, names, model and function names, providers): Unicode NFC, so a name typed with a
  combining accent is the name typed with the precomposed one; trimmed; refused when blank, when it
  holds a NUL (PostgreSQL text cannot) or when longer than its limit.
- emails: the same, then lower-cased with Python's lower(), as the import has always stored them
  (`İ` becomes `i` + U+0307), and checked for the shape name@domain.tld.
- file paths: checked (not blank, no NUL, at most PATH_MAX bytes) but neither trimmed nor normalised:
  on Linux a file name is bytes, and ` a.jsonl` or a decomposed `é` can name another, existing file.

The limits are held again by the database for every other path (the check constraints in
supabase/schemas/10_memory_core.sql and supabase/compat/supabase_compat.sql; a unique btree index
holds at most 2,704 bytes of a key).
"""

from __future__ import annotations

import argparse
import math
import re
import unicodedata
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from zm_roi.errors import UserError

# A project or team name is a label a person reads in a list: 200 characters is generous.
MAX_NAME = 200
# RFC 5321's longest forward path is 256 octets with its angle brackets: 254 for the address. Supabase
# Auth stores emails in a varchar(255).
MAX_EMAIL = 254
# A question, not a document: far above any real one, far below what the text-search parser chokes on
# (20,000 words exhausted its stack).
MAX_QUESTION = 2_000
# A litellm model name (roi.judge_calibrations.model holds at most 200), a provider name, a recall
# function's qualified name (two identifiers of at most 63 bytes, with room for quoting).
MAX_MODEL = 200
MAX_PROVIDER = 100
MAX_FUNCTION = 200
# Linux's PATH_MAX, in bytes.
MAX_PATH_BYTES = 4096
# Enough to catch a typo or a blank, not a full RFC 5322 parser: something@domain.tld, no spaces.
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def text(value: str, limit: int, *, blank: str, too_long: str) -> str:
    """NFC, trimmed, not blank, no NUL, at most `limit` characters. `blank` is the whole message for a
    blank value; `too_long` names the input in the message for an overlong one."""
    normalized = unicodedata.normalize("NFC", value).strip()
    if not normalized:
        raise UserError(blank)
    if "\x00" in normalized:
        raise UserError(f"{too_long} holds a NUL character: remove it")
    if len(normalized) > limit:
        raise UserError(f"{too_long} has {len(normalized):,} characters; it may have at most {limit:,}")
    return normalized


def email(value: str) -> str:
    """NFC, trimmed and lower-cased (Python's lower(), as the import has always stored it: `İ` becomes
    `i` + U+0307), within MAX_EMAIL; an empty, malformed or overlong address is refused."""
    normalized = unicodedata.normalize("NFC", value).strip().lower()
    if len(normalized) > MAX_EMAIL:
        raise UserError(f"the email address has {len(normalized):,} characters; an address has at most {MAX_EMAIL}")
    if not EMAIL.match(normalized) or "\x00" in normalized:
        raise UserError(f"{value!r} is not an email address (expected name@example.com)")
    return normalized


def name(value: str, option: str) -> str:
    """A project or team name as stored: NFC, trimmed, not blank, at most MAX_NAME characters. `option`
    is how the user gave it (`--project`), for the message."""
    what = option.lstrip("-")
    normalized = text(value, 10**9, blank=f"{option} must name a {what}, not be blank", too_long=option)
    if len(normalized) > MAX_NAME:
        raise UserError(f"{option} has {len(normalized):,} characters; a name has at most {MAX_NAME}")
    return normalized


def question(value: str) -> str:
    """A recall question: NFC, trimmed, not blank, at most MAX_QUESTION characters."""
    normalized = text(value, 10**9, blank="the question is empty: ask something", too_long="the question")
    if len(normalized) > MAX_QUESTION:
        raise UserError(f"the question has {len(normalized):,} characters; ask in at most {MAX_QUESTION:,}")
    return normalized


def path(value: str, option: str) -> str:
    """A file path as typed (not trimmed, not normalised: see the module's docstring), refused when
    blank, holding a NUL or longer than PATH_MAX."""
    if not value.strip():
        raise UserError(f"{option} needs a file name, not an empty string")
    if "\x00" in value:
        raise UserError(f"{option} holds a NUL character: remove it")
    if len(value.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise UserError(f"{option} is longer than a path may be ({MAX_PATH_BYTES:,} bytes): use a shorter one")
    return value


# Every option that takes text, by its argparse dest, and its normaliser. tests/unit/test_inputs.py
# fails when a command has a text option that is missing here.
ARGUMENTS: dict[str, Callable[[str], str]] = {
    "user": email,
    "project": lambda value: name(value, "--project"),
    "team": lambda value: name(value, "--team"),
    "question": question,
    "model": lambda value: text(
        value,
        MAX_MODEL,
        blank="--model needs a model name, not a blank (without --model: ZM_JUDGE_MODEL)",
        too_long="--model",
    ),
    "recall_function": lambda value: text(
        value,
        MAX_FUNCTION,
        blank="--recall-function needs a function name, not a blank (e.g. public.recall)",
        too_long="--recall-function",
    ),
    "provider": lambda value: text(
        value, MAX_PROVIDER, blank="--provider needs a provider name, such as openai", too_long="--provider"
    ),
    "file": lambda value: path(value, "the file"),
    "out": lambda value: path(value, "--out"),
}


def clean(args: argparse.Namespace) -> argparse.Namespace:
    """Every text option of a parsed command line through its normaliser, in place (None stays None)."""
    for dest, normalize in ARGUMENTS.items():
        value = getattr(args, dest, None)
        if isinstance(value, str):
            setattr(args, dest, normalize(value))
    return args


# ---- numbers: argparse types, range-checked as they are parsed ----------------------------------


def bounded_int(low: int, high: int, what: str):
    """An argparse type: an integer in [low, high], refused with a message that gives the range."""

    def parse(value: str) -> int:
        try:
            number = int(value.strip())
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            raise argparse.ArgumentTypeError(f"{what} from {low:,} to {high:,}, not {value!r}")
        return number

    return parse


def bounded_float(low: float, high: float, what: str, *, open_interval: bool = False):
    """An argparse type: a number in [low, high] (or (low, high) with `open_interval`), refused with a
    message that gives the range."""

    def parse(value: str) -> float:
        try:
            number = float(value.strip())
        except ValueError:
            number = math.nan
        inside = low < number < high if open_interval else low <= number <= high
        if not inside:
            brackets = f"between {low:g} and {high:g} exclusive" if open_interval else f"from {low:g} to {high:g}"
            raise argparse.ArgumentTypeError(f"{what} {brackets}, not {value!r}")
        return number

    return parse


def cap_usd(flag: str, clear: object):
    """An argparse type for a spending cap: US dollars, 0 or more, or `none` to clear it (`clear`)."""

    def parse(value: str) -> Decimal | object:
        if value.strip().lower() == "none":
            return clear
        try:
            number = Decimal(value.strip().lstrip("$"))
        except InvalidOperation:
            number = None
        if number is None or not number.is_finite() or number < 0:
            raise argparse.ArgumentTypeError(f"{flag} takes US dollars (0 or more) or none, not {value!r}")
        return number

    return parse
