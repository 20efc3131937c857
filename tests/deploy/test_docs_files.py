"""The user-facing docs stay complete: an example call for every MCP tool
(docs/mcp-tools.md, written by scripts/mcp_examples.py), the browser screenshots, and the
README's quick start blocks that scripts/readme_check runs in CI."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import anyio
import pytest

from guaipeca import Index
from guaipeca.config import load_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service, build_server

REPO = Path(__file__).resolve().parents[2]


def test_every_mcp_tool_has_an_example_call_and_output(tmp_path: Path) -> None:
    loaded = load_settings(None, env={"GUAIPECA_HOME": str(tmp_path)}, cwd=tmp_path)
    server = build_server(Service(Index(embedder=HashingEmbedder()), loaded))
    tools = anyio.run(server.list_tools)
    page = (REPO / "docs" / "mcp-tools.md").read_text(encoding="utf-8")
    for tool in tools:
        section = page.split(f"## `{tool.name}`\n", 1)
        assert len(section) == 2, f"{tool.name}: run scripts/mcp_examples.py"
        body = section[1].split("\n## ", 1)[0]
        assert "\n→ {" in body and "\n← {" in body, tool.name


@pytest.mark.parametrize("name", ["search.png", "document.png", "upload.png", "status.png"])
def test_the_browser_screenshots_are_checked_in(name: str) -> None:
    picture = REPO / "docs" / "screenshots" / name
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert picture.stat().st_size > 10_000


def test_the_readme_quick_start_is_marked_for_the_literal_check() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^<!-- readme-test -->\n```bash\n(.*?)^```", readme, flags=re.M | re.S)
    assert len(blocks) >= 2
    script = "\n".join(blocks)
    for step in ("pip install", "guaipeca index", "guaipeca serve --transport http", "/mcp"):
        assert step in script, step
    printed = subprocess.run(
        ["bash", str(REPO / "scripts" / "readme_check"), "--print"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert blocks[0].strip() in printed
    syntax = subprocess.run(["bash", "-n"], input=printed, capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
