"""``guaipeca token add | list | revoke``: the server's named tokens, kept hashed in the data
folder (server/tokens.py). The secret is printed once, by ``add``, and never again."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from guaipeca.cli.context import current_settings, err, out

__all__ = ["token_app"]

token_app = typer.Typer(
    help="Manage the server's named tokens (each caller its own Bearer token).",
    no_args_is_help=True,
)

_NAME = typer.Argument(help="The token's name: letters, digits, '.', '_' or '-'.")


@token_app.command("add")
def add(name: Annotated[str, _NAME]) -> None:
    """Make a token named NAME and print its secret (shown this once only)."""
    from guaipeca.server.tokens import TokenFile

    loaded = current_settings()
    tokens = TokenFile(loaded.data_dir)
    secret = tokens.add(name)
    out.print_verbatim(secret)
    err.print(
        f"token {name!r} added to {tokens.path}; its secret is shown only now. Clients send "
        "it as 'Authorization: Bearer <secret>'. A server that ran without any auth turns it "
        "on at its next start."
    )


@token_app.command("list")
def list_(
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List the named tokens (names and dates: the secrets are not kept)."""
    from guaipeca.server.tokens import TokenFile

    entries = TokenFile(current_settings().data_dir).entries()
    if as_json:
        rows = [{"name": t.name, "created": t.created} for t in entries]
        out.print_verbatim(json.dumps(rows, ensure_ascii=False))
        return
    for t in entries:
        out.print(f"{t.name}  created {t.created}")
    if not entries:
        err.print("no named tokens: add one with 'guaipeca token add NAME'")


@token_app.command("revoke")
def revoke(name: Annotated[str, _NAME]) -> None:
    """Revoke the token named NAME: a running server refuses it from its next request."""
    from guaipeca.server.tokens import TokenFile

    TokenFile(current_settings().data_dir).revoke(name)
    err.print(f"token {name!r} revoked")
