"""Corruption recovery: truncate, zero or garble each file of an index (and the conversion
cache), then open it again. Every case must either recover — primary → backup → rebuilt
from the catalog, with a logged warning, and answer exactly as before — or refuse with a
clear message that says how to repair. Never a traceback, never silently wrong results."""

from __future__ import annotations

import logging
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from guaipeca import Index
from guaipeca.config import EngineSettings
from guaipeca.embed import HashingEmbedder
from guaipeca.errors import IndexCorruptError
from guaipeca.ingest import sync_folder
from support.reliability import LONG, doc_text, marker, report

QUERIES = ("river stone harbor", "glacier ember signal", "quartz beacon")
Damage = Callable[[Path], None]


def _truncate(fraction: float) -> Damage:
    def damage(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * fraction)])

    return damage


def _zero(start: float, length: int) -> Damage:
    """Zero ``length`` bytes from ``start`` (a fraction of the file): a lost block."""

    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        at = int(len(data) * start)
        data[at : at + length] = bytes(len(data[at : at + length]))
        path.write_bytes(bytes(data))

    return damage


def _sqlite_free_pages(data: bytes) -> tuple[int, set[int], set[int]]:
    """A SQLite file's page size, its freelist trunk pages and its free leaf pages (1-based),
    read from the file format (header offset 32: the first trunk; each trunk lists leaves)."""
    page_size = int.from_bytes(data[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    trunks: set[int] = set()
    leaves: set[int] = set()
    trunk = int.from_bytes(data[32:36], "big")
    while trunk and trunk not in trunks:
        trunks.add(trunk)
        at = (trunk - 1) * page_size
        count = int.from_bytes(data[at + 4 : at + 8], "big")
        leaves.update(
            int.from_bytes(data[at + 8 + 4 * i : at + 12 + 4 * i], "big") for i in range(count)
        )
        trunk = int.from_bytes(data[at : at + 4], "big")
    return page_size, trunks, leaves


def _zero_page(start: float, *, in_use: bool) -> Damage:
    """Zero one whole page of a SQLite file: the first page from ``start`` (a fraction of the
    file) that is in use (a lost block of data), or that is a free leaf page (harmless: SQLite
    ignores what free pages hold). Chosen from the file's own freelist, so the case does not
    depend on where the data happens to lie."""

    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        page_size, trunks, leaves = _sqlite_free_pages(bytes(data))
        pages = len(data) // page_size
        wanted = [
            n
            for n in range(max(2, int(pages * start) + 1), pages + 1)
            if (n not in trunks and n not in leaves) == in_use and (in_use or n in leaves)
        ]
        assert wanted, "no such page in the catalog"
        at = (wanted[0] - 1) * page_size
        data[at : at + page_size] = bytes(page_size)
        path.write_bytes(bytes(data))

    return damage


def _garble(seed: int, count: int, *, skip: int = 0, end: int | None = None) -> Damage:
    """Overwrite ``count`` random bytes in ``[skip, end)`` (bit rot)."""

    def damage(path: Path) -> None:
        rng = random.Random(seed)
        data = bytearray(path.read_bytes())
        for _ in range(count):
            at = rng.randrange(skip, min(end or len(data), len(data)))
            data[at] = (data[at] + rng.randrange(1, 256)) % 256
        path.write_bytes(bytes(data))

    return damage


def _delete(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


def _build(path: Path) -> dict[str, list[tuple[str, str]]]:
    """An index with live, replaced and deleted documents; returns its answers."""
    rng = random.Random(5)
    with Index(path, embedder=HashingEmbedder()) as index:
        index.add_documents({f"d{i}": doc_text(rng, f"d{i}", 1) for i in range(60)})
        index.add_documents({f"d{i}": doc_text(rng, f"d{i}", 2) for i in range(0, 60, 7)})
        for i in range(3, 60, 11):
            index.delete_document(f"d{i}")
        return _answers(index)


def _answers(index: Index) -> dict[str, list[tuple[str, str]]]:
    out = {}
    for mode in ("hybrid", "dense", "keyword"):
        for q in (*QUERIES, marker("d8")):
            out[f"{mode}:{q}"] = [(h.chunk_id, h.text) for h in index.search(q, mode=mode)]
    return out


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    root = tmp_path_factory.mktemp("pristine") / "index"
    return root, _build(root)


@pytest.fixture(scope="module")
def rebuilt(
    pristine: tuple[Path, dict[str, object]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, object]:
    """The answers once the lexical index is rebuilt from the catalog: BM25 statistics then
    stop counting deleted chunks (as after ``compact``), so keyword scores move a little."""
    path = tmp_path_factory.mktemp("rebuilt") / "index"
    shutil.copytree(pristine[0], path)
    with Index(path, embedder=HashingEmbedder()) as index:
        index.compact()
        return _answers(index)


CORPUS = Path("corpora") / "default"
LIVE_ROWS = 64 + 150 * 64 * 4  # the vector file's first 150 rows: all in use (64 dimensions)
VECTORS, BACKUP, CATALOG = (
    CORPUS / "vectors.f32",
    CORPUS / "vectors.backup",
    CORPUS / "catalog.sqlite",
)
LEXICAL = CORPUS / "lexical"

# (name, [(file, damage)], what must happen: "recover" or "refuse")
CASES: list[tuple[str, list[tuple[Path, Damage]], str]] = [
    ("vectors truncated to nothing", [(VECTORS, _truncate(0))], "recover"),
    ("vectors truncated to half", [(VECTORS, _truncate(0.5))], "recover"),
    ("vectors cut mid-row", [(VECTORS, _truncate(0.77))], "recover"),
    ("vectors header zeroed", [(VECTORS, _zero(0, 64))], "recover"),
    ("vectors block zeroed", [(VECTORS, _zero(0.1, 4096))], "recover"),
    ("vectors wholly zeroed", [(VECTORS, _zero(0, 1 << 30))], "recover"),
    ("vectors garbled (50 bytes)", [(VECTORS, _garble(1, 50, skip=64, end=LIVE_ROWS))], "recover"),
    ("vectors garbled (1 byte)", [(VECTORS, _garble(2, 1, skip=64, end=LIVE_ROWS))], "harmless"),
    ("vectors deleted", [(VECTORS, _delete)], "recover"),
    ("backup truncated", [(BACKUP, _truncate(0.5))], "backup"),
    ("backup zeroed", [(BACKUP, _zero(0, 1 << 30))], "backup"),
    ("backup garbled", [(BACKUP, _garble(3, 20))], "backup"),
    (
        "vectors and backup truncated",
        [(VECTORS, _truncate(0.3)), (BACKUP, _truncate(0.3))],
        "recover",
    ),
    (
        "vectors zeroed, backup garbled",
        [(VECTORS, _zero(0.2, 9000)), (BACKUP, _garble(4, 5))],
        "recover",
    ),
    (
        "vectors garbled, backup deleted",
        [(VECTORS, _garble(5, 30, skip=64, end=LIVE_ROWS)), (BACKUP, _delete)],
        "recover",
    ),
    ("catalog truncated to nothing", [(CATALOG, _truncate(0))], "refuse"),
    ("catalog deleted", [(CATALOG, _delete)], "refuse"),
    ("catalog truncated to half", [(CATALOG, _truncate(0.5))], "refuse"),
    ("catalog header zeroed", [(CATALOG, _zero(0, 100))], "refuse"),
    ("catalog page in use zeroed", [(CATALOG, _zero_page(0.5, in_use=True))], "refuse"),
    ("catalog free page zeroed", [(CATALOG, _zero_page(0.5, in_use=False))], "harmless"),
    ("catalog garbled (200 bytes)", [(CATALOG, _garble(6, 200, skip=100))], "refuse"),
    ("catalog garbled (3 bytes)", [(CATALOG, _garble(7, 3, skip=100))], "refuse"),
    ("lexical index deleted", [(LEXICAL, _delete)], "rebuild"),
    ("lexical marker garbled", [(CORPUS / "lexical.state", _garble(8, 5))], "rebuild"),
    ("lexical files zeroed", [(LEXICAL / "meta.json", _zero(0, 1 << 20))], "rebuild"),
]


def _open_and_judge(
    path: Path, expected: dict[str, object], caplog: pytest.LogCaptureFixture
) -> str:
    """'recovered' when the index answers exactly as before and passes its check (after
    a logged warning); 'refused' on a clear IndexCorruptError; anything else fails."""
    caplog.clear()
    try:
        with (
            caplog.at_level(logging.WARNING, logger="guaipeca"),
            Index(path, embedder=HashingEmbedder()) as index,
        ):
            if index.broken_corpora:
                reason = index.broken_corpora["default"]
                assert "guaipeca index --force" in reason, reason
                with pytest.raises(IndexCorruptError):
                    index.search("river", corpora=["default"])
                return "refused"
            check = index.verify()
            if not check.ok:
                problems = check.to_dict()["corpora"][0]["problems"]
                assert problems and all(isinstance(p, str) for p in problems)
                return "detected"
            assert _answers(index) == expected, "silently wrong results"
    except IndexCorruptError as exc:
        assert "guaipeca index --force" in str(exc), exc
        return "refused"
    if not any(r.levelno == logging.WARNING for r in caplog.records):
        return "unchanged"  # nothing noticed, and the answers are exactly the old ones
    return "recovered"


@pytest.mark.parametrize(("name", "damages", "expect"), CASES, ids=[c[0] for c in CASES])
def test_corruption_recovers_or_refuses(
    name: str,
    damages: list[tuple[Path, Damage]],
    expect: str,
    pristine: tuple[Path, dict[str, object]],
    rebuilt: dict[str, object],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    source, expected = pristine
    path = tmp_path / "index"
    shutil.copytree(source, path)
    for rel, damage in damages:
        damage(path / rel)
    outcome = _open_and_judge(path, rebuilt if expect == "rebuild" else expected, caplog)
    if expect in ("recover", "rebuild"):
        assert outcome == "recovered"
    elif expect == "harmless":
        # A low-order byte of one float: below what a norm check sees, and the answers
        # are exactly the old ones.
        assert outcome in ("recovered", "unchanged")
    elif expect == "backup":
        # The primary is fine, so answers are right; the check names the damaged backup,
        # and compact writes a fresh one.
        assert outcome == "detected"
        with Index(path, embedder=HashingEmbedder()) as index:
            assert _answers(index) == expected
            index.compact()
            assert index.verify().ok
        outcome = "recovered"
    else:
        assert outcome in ("refused", "detected")
    report("corruption", case=name, outcome=outcome)


def test_unreproducible_vectors_are_refused_with_the_repair(
    pristine: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    """Vectors and backup both gone, and the settings changed so the chunks' embedding
    inputs cannot be rebuilt: refuse, naming the repair."""
    source, _ = pristine
    path = tmp_path / "index"
    shutil.copytree(source, path)
    _truncate(0.4)(path / VECTORS)
    _delete(path / BACKUP)
    changed = EngineSettings.model_validate({"embedding": {"preprocess": True}})
    with Index(path, embedder=HashingEmbedder(), settings=changed) as index:
        assert "default" in index.broken_corpora
        assert "guaipeca index --force" in index.broken_corpora["default"]
    report("corruption", case="vectors and backup lost, settings changed", outcome="refused")


def test_damaged_conversion_cache_is_a_miss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache entry truncated, zeroed or garbled (even into other valid JSON) is converted
    again; the documents come out identical."""
    folder, cache = tmp_path / "docs", tmp_path / "converted"
    folder.mkdir()
    for i in range(4):
        body = "".join(f"<p>{marker(f'h{i}')} paragraph {k} river stone</p>" for k in range(5))
        (folder / f"page{i}.html").write_text(f"<html><body><h1>Page {i}</h1>{body}</body></html>")
    with Index(tmp_path / "a", embedder=HashingEmbedder()) as index:
        sync_folder(index, folder, corpus="docs", cache_dir=cache)
        before = {d.doc_id: index.get_document(d.doc_id).text for d in index.list_documents()}
    entries = sorted(cache.rglob("*.json"))
    assert len(entries) == 4
    _truncate(0.5)(entries[0])
    _zero(0, 1 << 20)(entries[1])
    _garble(9, 10)(entries[2])
    text = entries[3].read_text(encoding="utf-8")
    entries[3].write_text(text.replace("river", "rivet", 1), encoding="utf-8")  # valid JSON
    with (
        caplog.at_level(logging.WARNING, logger="guaipeca"),
        Index(tmp_path / "b", embedder=HashingEmbedder()) as index,
    ):
        sync_folder(index, folder, corpus="docs", cache_dir=cache)
        after = {d.doc_id: index.get_document(d.doc_id).text for d in index.list_documents()}
    assert after == before
    assert sum("converting again" in r.getMessage() for r in caplog.records) == 4
    report("corruption", case="conversion cache (4 damaged entries)", outcome="recovered")


GUAIPECA = Path(sys.executable).parent / "guaipeca"


@pytest.mark.parametrize("damage", ["truncate", "garble"] if LONG else ["garble"])
def test_cli_names_the_repair_without_a_traceback(damage: str, tmp_path: Path) -> None:
    """The real CLI on a damaged catalog: a one-line error with the repair, exit code 1;
    and after 'index --force' the index is whole again."""
    docs, home = tmp_path / "docs", tmp_path / "home"
    docs.mkdir()
    for i in range(3):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\n{marker(f'n{i}')} river stone {i}\n")
    env = {"GUAIPECA_HOME": str(home), "PATH": "/usr/bin:/bin"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(GUAIPECA), *args], env=env, capture_output=True, text=True, timeout=300
        )

    assert run("index", "--path", str(docs)).returncode == 0
    catalog = home / "data" / "index" / CATALOG
    (_truncate(0.4) if damage == "truncate" else _zero(0, 100))(catalog)
    for args in (("search", "river"), ("check",), ("status",)):
        done = run(*args)
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr
        assert "guaipeca index --force" in done.stdout + done.stderr, done
    assert run("search", "river").returncode == 1
    assert run("check").returncode == 1
    assert run("index", "--path", str(docs), "--force").returncode == 0
    fixed = run("check")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    report("corruption", case=f"catalog {damage}d, real CLI", outcome="refused, then repaired")
