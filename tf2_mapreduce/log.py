"""What the library says while it works, on the "tf2_mapreduce" logger: resuming,
checkpoints, retries, servers it could not tell that the job is over. Printing is for
whoever runs it: the CLI shows these lines on stderr, a Python program configures
`logging` (warnings reach stderr by default, as Python's are).
"""

import logging

from tf2_mapreduce.errors import SETTING

__all__ = ["LOGGER", "Message", "info", "warning"]

LOGGER = logging.getLogger("tf2_mapreduce")


class Message:
    """A log line that names settings with `errors.setting()`: `str()` shows them as
    Python's keyword arguments (what a Python caller set), `cli()` as the CLI's flags."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return SETTING.sub(r"\1", self.text)

    def cli(self):
        return SETTING.sub(r"--\1", self.text)


def info(text):
    LOGGER.info(Message(text))


def warning(text):
    LOGGER.warning(Message(text))
