"""Constants shared by the web page's tests (tests/server/web): the server's Bearer token."""

from __future__ import annotations

TOKEN = "web-page-test-token-0123456789abcdef"
