"""A group called without arguments shows its help (``no_args_is_help``), not a one-line usage
error: Typer raises that help as a usage error, and ``autograder.cli`` tells the two apart through
Typer's public names only (the message is the help itself)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from autograder.cli import app

EXIT_USAGE = 2


@pytest.mark.parametrize("args", [[], ["gradescope"]], ids=["autograder", "gradescope"])
def test_a_group_without_arguments_shows_its_help(args):
    result = CliRunner().invoke(app, args, prog_name="autograder")
    assert result.exit_code == EXIT_USAGE, result.output
    assert result.output.startswith(f"Usage: {' '.join(['autograder', *args])} [OPTIONS] COMMAND"), result.output
    assert "Commands:" in result.output and "error:" not in result.output


def test_a_mistake_next_to_it_is_still_one_line():
    result = CliRunner().invoke(app, ["gradescope", "--bogus"])
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.strip().startswith("error: No such option: --bogus") and "Usage:" not in result.output
