"""Errors a user can act on: the CLI prints them as one line, never as a traceback."""


class UserError(Exception):
    """Something the user can fix; the message says what to do."""


class AuthError(UserError):
    """The access token is missing, malformed, expired, wrongly signed or names no user.

    Raised before any SQL runs, so a bad token never reaches the database as anything but a refusal.
    """
