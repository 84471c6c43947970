"""The ``autograder`` command line. Each command is thin: it parses, calls one function, prints.

Commands live beside the code they drive and register themselves here through a
``register(app)`` function, so this file only lists them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from typing import Iterator, NoReturn

import typer
from typer.core import TyperGroup

from . import __version__
from .cli_checks import EXIT_INTERRUPTED, EXIT_USAGE, one_line


class OneLineErrors(TyperGroup):
    """The app's group: usage errors (an unknown option or command, a missing or bad argument)
    become one line on stderr and exit 2, not the usage block, try-line and error box.

    Only Typer's public names: its usage errors are ``typer.TyperException``s whose ``exit_code``
    is 2 (Typer keeps its copy of Click private; its classes are not Click's)."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:  # type: ignore[override]  # typer's public Context
        with _one_line_usage():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: typer.Context) -> object:  # type: ignore[override]  # typer's public Context
        with _one_line_usage():
            return super().invoke(ctx)


@contextlib.contextmanager
def _one_line_usage() -> Iterator[None]:
    try:
        yield
    except typer.TyperException as e:
        ctx: typer.Context | None = getattr(e, "ctx", None)
        if getattr(e, "exit_code", None) != EXIT_USAGE or _is_help(e, ctx):
            raise
        where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        typer.secho(f"error: {one_line(e.format_message())}{where}", fg="red", err=True)
        raise typer.Exit(EXIT_USAGE) from None


def _is_help(e: typer.TyperException, ctx: typer.Context | None) -> bool:
    """The help a group shows when called without arguments (``no_args_is_help``): raised as a
    usage error whose message is the help itself."""
    return ctx is not None and e.format_message() == ctx.get_help()


app = typer.Typer(
    cls=OneLineErrors,
    help="Grade 'ONNX Runtime for Engineers' notebooks: execute in a jail, measure, judge, report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help: flags are listed without a value placeholder (typer's rich help shows `<bool>`
    # for every flag, as if `--no-cache true` were how to write it); usage errors: OneLineErrors
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"autograder {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Grade 'ONNX Runtime for Engineers' notebooks: execute in a jail, measure, judge, report."""


def _register_all() -> None:
    from . import cli_grade
    from .authoring import cli as cli_authoring
    from .batch import cli as cli_batch
    from .batch import export_cli, manual_cli
    from .gradescope import cli as cli_gradescope

    for module in (cli_grade, cli_batch, manual_cli, export_cli, cli_authoring, cli_gradescope):
        module.register(app)


_register_all()


def main() -> NoReturn:
    """The ``autograder`` console script: the app, then a quick exit.

    Tearing down an interpreter that imported ONNX Runtime, scikit-learn and matplotlib takes
    about half a second here (thousands of modules, freed one by one), paid after every command
    has finished its work. So, once the command is done and no other thread runs, the exit
    handlers run (temporary folders, logging) and the process ends with ``os._exit``: every file
    the commands write is closed by then (``with`` blocks, atomic writes).

    SIGTERM is handled like Ctrl-C (``terminate_as_interrupt``), and the exit status then says
    which signal it was (143, not 130)."""
    received = terminate_as_interrupt()
    try:
        app()
        code: object = 0
    except SystemExit as e:
        code = e.code
    if code == EXIT_INTERRUPTED and received:
        code = 128 + received[-1]
    _leave(code)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt: every command cleans up the same way
    (kernels shut down, a batch's workers stopped and its unfinished folders removed, an
    interrupted grade's files removed) and exits as interrupted."""


def terminate_as_interrupt() -> list[int]:
    """Install the SIGTERM handler (the console script only, in the main thread); returns the list
    the handler appends the signal to. A second SIGTERM while cleaning up is ignored (a Python
    handler, not SIG_IGN, so that no process started meanwhile inherits it)."""
    received: list[int] = []

    def on_term(signum: int, frame: object) -> None:
        if received:
            return
        received.append(signum)
        raise Terminated()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_term)
    return received


def _leave(code: object) -> NoReturn:
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): printed, exit status 1
        print(code, file=sys.stderr)
        code = 1
    if threading.active_count() > 1:  # a thread still runs: the normal exit waits for it
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
