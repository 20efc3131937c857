"""Issue 29, disk per identity: the bytes of uploaded files one identity keeps are capped
(``upload.max_bytes_per_identity``), against a real server on 127.0.0.1 with two JWT
identities. One identity filling its budget gets 507 naming the setting; the other uploads
on; deleting (or removing the file by hand) frees the budget; the ledger outlives a restart.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import jwt
import pytest

from guaipeca.server.quota import UploadLedger
from support.http import Served
from support.reliability import make_service

JWT_SECRET = "quota-test-jwt-secret-0123456789abcdef-0123456"
BUDGET = 10_000


def as_user(name: str) -> dict[str, str]:
    claims = {"sub": name, "exp": int(time.time()) + 3600}
    return {"Authorization": f"Bearer {jwt.encode(claims, JWT_SECRET, algorithm='HS256')}"}


ALICE, BOB = as_user("alice"), as_user("bob")


@contextlib.contextmanager
def served(root: Path) -> Iterator[str]:
    server = {"jwt_secret": JWT_SECRET, "max_writes_per_caller": 8}  # five at once queue
    service = make_service(root, server, docs=2, upload={"max_bytes_per_identity": BUDGET})
    try:
        with Served(service) as live:
            yield live.url
    finally:
        service.index.close()


def doc(words: int, tag: str) -> bytes:
    return (f"# {tag}\n\n" + " ".join(f"{tag}{i}" for i in range(words)) + "\n").encode()


def put(url: str, name: str, body: bytes, who: dict[str, str], **params: str) -> httpx2.Response:
    query = {"corpus": "docs", "filename": name, **params}
    return httpx2.put(f"{url}/api/upload", params=query, content=body, headers=who, timeout=60)


def test_one_identity_fills_its_budget_and_the_other_uploads_on(tmp_path: Path) -> None:
    four_k = doc(600, "alpha")[:4000]
    with served(tmp_path) as url:
        assert put(url, "a1.md", four_k, ALICE).status_code == 200
        assert put(url, "a2.md", four_k, ALICE).status_code == 200
        refused = put(url, "a3.md", four_k, ALICE)  # 12,000 > 10,000
        assert refused.status_code == 507, refused.text
        message = refused.json()["error"]
        assert "upload.max_bytes_per_identity" in message and "nothing was written" in message
        assert not (tmp_path / "docs" / "a3.md").exists()
        # The web API's tool door says the same, with the same status.
        encoded = base64.b64encode(four_k).decode()
        body = {"corpus": "docs", "filename": "a4.md", "content_base64": encoded}
        tool = httpx2.post(f"{url}/api/tools/upload", json=body, headers=ALICE, timeout=60)
        assert tool.status_code == 507 and "max_bytes_per_identity" in tool.text
        # Another identity has a budget of its own.
        assert put(url, "b1.md", four_k, BOB).status_code == 200
        # Replacing one's own file counts its new size only.
        assert put(url, "a1.md", four_k[:3000], ALICE, overwrite="true").status_code == 200
        # Deleting frees the budget; so does a file removed by hand.
        deleted = httpx2.post(
            f"{url}/api/tools/delete", json={"corpus": "docs", "doc_id": "a2.md"}, headers=ALICE
        )
        assert deleted.status_code == 200, deleted.text
        assert put(url, "a3.md", four_k, ALICE).status_code == 200  # 3,000 + 4,000
        assert put(url, "a5.md", four_k, ALICE).status_code == 507  # 11,000
        (tmp_path / "docs" / "a3.md").unlink()
        assert put(url, "a5.md", four_k, ALICE).status_code == 200  # 3,000 + 4,000 again
    # The ledger outlives the server: alice is at 7,000 after a restart too.
    with served(tmp_path) as url:
        assert put(url, "a6.md", four_k, ALICE).status_code == 507
        assert put(url, "a6.md", four_k[:2000], ALICE).status_code == 200


def test_the_write_turn_checks_again_so_parallel_uploads_cannot_slip_under(
    tmp_path: Path,
) -> None:
    # Five 4,000-byte uploads sent together all pass the early check (nothing is stored
    # yet); in the write turn, where they land one at a time, only two fit.
    import concurrent.futures

    with served(tmp_path) as url, concurrent.futures.ThreadPoolExecutor(5) as pool:
        answers = list(
            pool.map(
                lambda i: put(url, f"p{i}.md", doc(600, f"p{i}x")[:4000], ALICE).status_code,
                range(5),
            )
        )
    assert sorted(answers) == [200, 200, 507, 507, 507], answers
    assert len(list((tmp_path / "docs").glob("p*.md"))) == 2


def test_an_unusable_ledger_leaves_uploads_unbudgeted_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "uploads.sqlite").mkdir()  # a folder where the database should be
    ledger = UploadLedger(tmp_path, 10)
    ledger.check("alice", "docs", "x.md", 1_000_000, lambda c, r: tmp_path / r)  # not refused
    ledger.record("alice", "docs", "x.md", 1_000_000)
    assert ledger.used("alice") == 0
    assert [r.message for r in caplog.records if "not budgeted" in r.message]


def test_no_ledger_is_made_when_uploads_are_off_or_unlimited(tmp_path: Path) -> None:
    UploadLedger(tmp_path, 10, uploads_on=False).check("a", "c", "r", 99, lambda c, r: tmp_path)
    UploadLedger(tmp_path, 0).check("a", "c", "r", 99, lambda c, r: tmp_path)
    assert not (tmp_path / "uploads.sqlite").exists()
