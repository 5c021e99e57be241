"""The project's error kinds, bad input a user can fix: the entry points print each as one line, `<kind>:
<message>`; a sweep's job returns one as `JobFailed`, so the sweep records the job as failed and goes on."""


class UserError(Exception):
    """Bad input: the message names the bad value and the fix."""

    kind = "error"


class ConfigError(UserError, ValueError):
    """A config value that cannot work."""

    kind = "config error"


class DataError(UserError, ValueError):
    """Data that cannot be loaded or used as configured."""

    kind = "data error"


class CheckpointError(UserError, RuntimeError):
    """A checkpoint that cannot be used."""

    kind = "checkpoint error"


class InputError(UserError, ValueError):
    """Texts to classify that are missing or unreadable."""

    kind = "input error"


class DiskError(UserError, OSError):
    """A disk that is full (or a folder that cannot be written): the message names the folder and its free space."""

    kind = "disk error"


def printable(text: object) -> str:
    """`text` safe to print: unprintable characters (escape sequences, newlines) as Python escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


class JobFailed:
    """What a sweep's job returns for a UserError: the sweep records it as failed and names it at its end."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind, self.message = kind, message

    def __repr__(self) -> str:
        return f"{self.kind}: {self.message}"
