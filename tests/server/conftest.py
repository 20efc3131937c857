"""Fixtures the server's identity tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.oidc import OidcProvider, require_provider


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    """A real OpenID provider (oidc-provider on node) on 127.0.0.1, one per test module:
    a module that rotates its keys does not disturb another's."""
    require_provider()
    with OidcProvider(tmp_path_factory.mktemp("oidc")) as provider:
        yield provider
