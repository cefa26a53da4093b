"""Errors a user can act on: the CLI prints them as one line, never as a traceback."""


class UserError(Exception):
    """Something the user can fix; the message says what to do."""
