"""The command line: ``guaipeca init | index | search | status | …``. app.py wires the
commands, one module per group (indexing, searching, status, maintenance, serving,
configure, evaluation); docs/architecture.md maps each command to its module."""

from guaipeca.cli.app import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, EXIT_USER, app, main

__all__ = ["EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "EXIT_USER", "app", "main"]
