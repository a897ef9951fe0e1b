"""The code is as ruff's linter and formatter want it (rules in pyproject.toml)."""

import subprocess
import sys

from helpers.processes import REPO


def ruff(*args):
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, timeout=120)


def test_ruff_finds_nothing():
    run = ruff("check", "--output-format", "concise", ".")
    assert run.returncode == 0, run.stdout.decode() + run.stderr.decode()


def test_ruff_format_changes_nothing():
    run = ruff("format", "--check", ".")
    assert run.returncode == 0, run.stdout.decode() + run.stderr.decode()
