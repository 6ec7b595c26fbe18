"""Errors the command line reports to the user without a traceback."""


class UsageError(Exception):
    """Bad input from the user: the CLI prints it on one line and exits 2."""
