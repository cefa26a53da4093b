"""The one normaliser for what a user types to name someone or something: emails, project and team names.

Every command that takes an email or a name (import, recall, token, set-key, the demo) passes it through
here, so one spelling finds what another created, and a name over its limit is refused with that limit
before PostgreSQL refuses it (a unique btree index holds at most 2,704 bytes of a key; the check
constraints in supabase/schemas/10_memory_core.sql and supabase/compat/supabase_compat.sql hold the same limits
for every other path).
"""

from __future__ import annotations

import re

from zm_roi.errors import UserError

# A project or team name is a label a person reads in a list: 200 characters is generous.
MAX_NAME = 200
# RFC 5321's longest forward path is 256 octets with its angle brackets: 254 for the address. Supabase
# Auth stores emails in a varchar(255).
MAX_EMAIL = 254
# Enough to catch a typo or a blank, not a full RFC 5322 parser: something@domain.tld, no spaces.
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def email(text: str) -> str:
    """Trimmed and lower-cased (Python's lower(), as the import has always stored it: `İ` becomes
    `i` + U+0307), within MAX_EMAIL; an empty, malformed or overlong address is refused."""
    normalized = text.strip().lower()
    if len(normalized) > MAX_EMAIL:
        raise UserError(f"the email address has {len(normalized):,} characters; an address has at most {MAX_EMAIL}")
    if not EMAIL.match(normalized):
        raise UserError(f"{text!r} is not an email address (expected name@example.com)")
    return normalized


def name(text: str, option: str) -> str:
    """A project or team name as stored: trimmed, not blank, at most MAX_NAME characters. `option` is
    how the user gave it (`--project`), for the message."""
    trimmed = text.strip()
    what = option.lstrip("-")
    if not trimmed:
        raise UserError(f"{option} must name a {what}, not be blank")
    if len(trimmed) > MAX_NAME:
        raise UserError(f"{option} has {len(trimmed):,} characters; a name has at most {MAX_NAME}")
    return trimmed
