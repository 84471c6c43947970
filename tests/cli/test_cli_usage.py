"""Usage errors (what click finds: an unknown option or command, a missing or bad argument) are
one line on stderr and exit 2, like every other mistake in the command, for every command."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer.main
from typer.testing import CliRunner

from autograder.cli import app

EXIT_USAGE = 2


def _commands(command, path=()):
    """Every command and group of the app, as the words that name it."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


COMMANDS = [path for path, _ in _commands(typer.main.get_command(app))]
# the commands with a required argument or option
NEEDY = [
    path
    for path, command in _commands(typer.main.get_command(app))
    if not getattr(command, "commands", None) and any(p.required for p in command.params)
]


def _one_line(args):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == EXIT_USAGE, (args, result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr)
    assert "Usage:" not in result.output and "Traceback" not in result.output
    return lines[0]


def test_the_commands_are_found():
    assert {("grade",), ("batch",), ("rescore",), ("gradescope", "simulate")} <= set(COMMANDS)
    assert {("grade",), ("batch",), ("rescore",), ("gradescope", "simulate")} <= set(NEEDY)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "autograder")
def test_an_unknown_option_is_one_line_for_every_command(path):
    line = _one_line([*path, "--no-such-option"])
    assert "--no-such-option" in line and " ".join((*path, "--help")) + "')" in line


@pytest.mark.parametrize("path", NEEDY, ids=" ".join)
def test_a_missing_argument_or_option_is_one_line(path):
    assert "Missing" in _one_line(list(path))


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["no-such-command"], "No such command"),
        (["gradescope", "no-such-command"], "No such command"),
        (["batch", "src", "-o", "out", "-j", "-1"], "--jobs"),
        (["batch", "src", "-o", "out", "--no-cache", "true"], "unexpected extra argument"),
    ],
    ids=["command", "subcommand", "bad-value", "flag-value"],
)
def test_other_usage_mistakes_are_one_line(args, fragment):
    assert fragment in _one_line(args)


def test_the_console_script_prints_one_line_too(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.cli", "grade", "--bogus"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == EXIT_USAGE and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: No such option: --bogus"), proc.stderr


def test_no_arguments_still_shows_the_help():
    result = CliRunner().invoke(app, [])
    assert "Commands" in result.output and "grade" in result.output
