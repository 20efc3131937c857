"""The ``guaipeca`` command: the typer app, its global options (``--config``, ``--version``,
``--verbose``), every command registered in the order ``--help`` lists them, and
:func:`main`, the entry point that maps errors to exit codes (context.py lists them). Logs
and progress go to stderr; results go to stdout (``--json`` for scripts).

Each command lives with its group: configure.py (init, check-model), indexing.py (index),
searching.py (search), status.py (status, corpora), maintenance.py (drop, migrate, reembed,
compact, check), serving.py (serve, install-service), tokens.py (token add, list, revoke),
evaluation.py (eval), audit.py (audit, the server's log of writes and denied requests),
legacy.py (migrate-config, import-faiss: coming from the systems Guaipeca replaces). A
command imports what it needs when it runs, so that ``guaipeca --help`` and a keyword search
start fast.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperOption

from guaipeca.cli.audit import audit
from guaipeca.cli.configure import check_model, init
from guaipeca.cli.context import (
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_USER,
    VisibleFormatter,
    err,
    log,
    out,
    state,
)
from guaipeca.cli.evaluation import eval_
from guaipeca.cli.indexing import index
from guaipeca.cli.legacy import import_faiss, migrate_config
from guaipeca.cli.maintenance import check, compact, drop, migrate, reembed
from guaipeca.cli.searching import search
from guaipeca.cli.serving import install_service, serve
from guaipeca.cli.status import corpora, status
from guaipeca.cli.tokens import token_app
from guaipeca.errors import GuaipecaError, disk_full

__all__ = ["EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "EXIT_USER", "app", "main"]


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    return None if self.is_flag else _option_type(self, ctx)


# Typer's help shows a type tag beside every option, "<bool>" on flags too, where it says
# nothing (a flag takes no value): flags show none.
_option_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

app = typer.Typer(
    help="Guaipeca: exact, citable hybrid search over your own documents, on one CPU.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from guaipeca import __version__

        out.print(f"guaipeca {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _main(
    ctx: typer.Context,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            "-c",
            envvar="GUAIPECA_CONFIG",
            help="Config file (default: $GUAIPECA_HOME/guaipeca.yaml, ~/.guaipeca/...).",
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log more detail to stderr.")
    ] = False,
    check_model_flag: Annotated[
        bool,
        typer.Option(
            "--check-model", help="The same as 'guaipeca check-model' (the original's flag)."
        ),
    ] = False,
) -> None:
    state.config = config
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(VisibleFormatter("%(levelname)s %(name)s: %(message)s"))
    state.verbose = verbose
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, handlers=[handler], force=True
    )
    if ctx.invoked_subcommand is not None:
        return
    if not check_model_flag:
        err.print("error: missing command (guaipeca --help lists them)")
        raise typer.Exit(EXIT_USAGE)
    check_model(download=False, as_json=False)


app.command()(init)
app.command()(index)
app.command()(search)
app.command()(status)
app.command()(corpora)
app.command()(drop)
app.command()(serve)
app.command("install-service")(install_service)
app.add_typer(token_app, name="token")
app.command("check-model")(check_model)
app.command()(migrate)
app.command()(reembed)
app.command()(compact)
app.command()(check)
app.command()(audit)
app.command("eval")(eval_)
app.command("migrate-config")(migrate_config)
app.command("import-faiss")(import_faiss)


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs the app and maps errors to exit codes."""
    try:
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        code = app(args=argv, prog_name="guaipeca", standalone_mode=False)
        if isinstance(code, int) and not isinstance(code, bool) and code != EXIT_OK:
            return code
    except GuaipecaError as exc:
        err.print(f"error: {exc}")
        return EXIT_USER
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        err.print("aborted")
        return EXIT_USER
    except typer.TyperException as exc:  # usage errors and bad parameters (click's kind)
        exc.show(file=sys.stderr)  # type: ignore[attr-defined]
        code = int(getattr(exc, "exit_code", EXIT_USER))
        return EXIT_USAGE if code == EXIT_USAGE else EXIT_USER
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    except Exception as exc:
        full = disk_full(exc, state.data_dir or Path.cwd())
        if full is not None:  # not a bug: one line, like any user error
            err.print(f"error: {full}", markup=False)
            return EXIT_USER
        log.debug("internal error", exc_info=True)
        err.print(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_INTERNAL
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
