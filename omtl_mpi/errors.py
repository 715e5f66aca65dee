"""Errors that reach the user as clear lines and a non-zero exit code."""


class UserError(ValueError):
    """A problem with the user's input (file, option, world size, an argument of the Python API).

    The one exception class a caller of the package catches for bad input: a ValueError, as
    Python and scikit-learn raise for a bad argument value (an ``except ValueError`` around
    code that may raise it must let it through first).

    The message is shown prefixed with ``error:``, one line per problem (a message may list
    several problems, one per line); the process exits with :attr:`exit_code` (2, like
    click's usage errors). Nothing is half-written.
    """

    exit_code = 2

    def __init__(self, message: str):
        lines = [" ".join(line.split()) for line in str(message).splitlines()]
        super().__init__("\n".join(line for line in lines if line))

    @property
    def lines(self) -> list[str]:
        return str(self).splitlines()


class DataError(UserError):
    """A data file is malformed, or its contents are not a valid multi-task stream."""


class ConfigError(UserError):
    """A hyper-parameter or option value is invalid."""
