"""`transform.early.saving`: what saving a transform_fn raised is said as the user's error, in
one line, only where it is theirs (their function's, or TensorFlow's saving of it); the
machine's errors and a bug of this package's own code pass through as they are."""

import pytest

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.transform import early, trace


def users_function():
    raise ValueError("the user's mistake")


def test_what_the_users_function_raises_is_one_line_of_theirs():
    said = r"cannot be saved: ValueError: the user's mistake \(.*test_transform_saving.py line \d+\)$"
    with pytest.raises(UsageError, match=said):
        with early.saving():
            users_function()


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), MemoryError()])
def test_the_machines_errors_pass_through(error):
    with pytest.raises(type(error)):
        with early.saving():
            raise error


def test_an_error_raised_in_this_packages_code_passes_through():
    with pytest.raises(ValueError, match="Vocabulary size not found"):
        with early.saving():
            trace._vocabulary_index([], "never")
