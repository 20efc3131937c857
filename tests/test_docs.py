"""The README documents every command and every MCP tool that exists."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import typer

from guaipeca.cli import app

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_every_cli_command_is_in_the_readme() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert set(commands) >= {"init", "index", "search", "status", "check-model", "compact", "serve"}
    for name in commands:
        assert f"  {name} " in README or f"guaipeca {name}" in README, name


def test_every_mcp_tool_is_in_the_readme(tmp_path: Path) -> None:
    from guaipeca import Index
    from guaipeca.config import load_settings
    from guaipeca.embed import HashingEmbedder
    from guaipeca.server import Service, build_server

    loaded = load_settings(None, env={"GUAIPECA_HOME": str(tmp_path)}, cwd=tmp_path)
    server = build_server(Service(Index(embedder=HashingEmbedder()), loaded))
    tools = anyio.run(server.list_tools)
    assert len(tools) >= 10
    for tool in tools:
        assert f"| `{tool.name}` |" in README, tool.name


@pytest.mark.parametrize("section", ["## The two commands", "## Configuration", "## MCP server"])
def test_the_readme_has_its_sections(section: str) -> None:
    assert section in README


def _section(title: str) -> str:
    start = README.index(f"\n{title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_limitations_do_not_deny_per_corpus_grants() -> None:
    # Issue 38: grants per corpus (the config's access: section) exist; Limitations said not.
    from guaipeca.config import Settings

    assert "access" in Settings.model_fields
    assert "per-corpus permissions" not in _section("## Limitations")
