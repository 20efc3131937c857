"""The command line: ``guaipeca index | search | status | serve | …`` (commands), the
Qdrant migration command (migrate) and the systemd unit it installs (service_unit)."""

from guaipeca.cli.commands import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, EXIT_USER, app, main

__all__ = ["EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "EXIT_USER", "app", "main"]
