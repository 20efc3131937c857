"""Helpers for the reliability tests (crash, corruption, cross-process, load): documents
whose every version is known, the check that an index holds exactly what was acknowledged,
and the figures each test reports.

Counts scale with ``GUAIPECA_RELIABILITY=long`` (``bash scripts/reliability``); figures are
appended as JSON lines to ``$GUAIPECA_RELIABILITY_REPORT`` when it is set.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx2
import psutil
import pytest

from guaipeca import Index
from guaipeca.chunk import canonicalize
from guaipeca.config import LoadedSettings, parse_settings
from guaipeca.embed import HashingEmbedder
from guaipeca.server import Service

LONG = os.environ.get("GUAIPECA_RELIABILITY") == "long"
SCRIPT = Path(sys.executable).parent / "guaipeca"

_WORDS = tuple(
    [
        "river",
        "stone",
        "cedar",
        "lantern",
        "harbor",
        "meadow",
        "copper",
        "violet",
        "falcon",
        "orchard",
        "glacier",
        "ember",
        "signal",
        "canyon",
        "willow",
        "marble",
        "thunder",
        "prairie",
        "quartz",
        "beacon",
        "summit",
        "tundra",
        "velvet",
        "anchor",
    ]
)


def scaled(fast: int, long: int) -> int:
    """``fast`` in the default run, ``long`` under ``scripts/reliability``."""
    return long if LONG else fast


def report(name: str, **figures: Any) -> None:
    """Record a test's figures (printed with -s, and appended to the report file)."""
    line = json.dumps({"test": name, "long": LONG, **figures})
    print(line)
    target = os.environ.get("GUAIPECA_RELIABILITY_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def marker(doc_id: str) -> str:
    """A word found in exactly one document (letters only, so every analyzer keeps it)."""
    digest = hashlib.sha256(doc_id.encode("utf-8")).digest()
    return "zq" + "".join(chr(ord("a") + b % 26) for b in digest[:10])


def doc_text(rng: random.Random, doc_id: str, version: int, *, paragraphs: int = 0) -> str:
    """A Markdown document: headings, a few paragraphs, and its marker word in each."""
    count = paragraphs or rng.randint(1, 12)
    parts = [f"# Document {doc_id} version {version}\n"]
    for p in range(count):
        if p % 4 == 3:
            parts.append(f"## Part {p}\n")
        words = [rng.choice(_WORDS) for _ in range(rng.randint(20, 160))]
        parts.append(f"{marker(doc_id)} v{version} " + " ".join(words) + ".\n")
    return "\n".join(parts)


def kill(proc: subprocess.Popen[Any]) -> bool:
    """SIGKILL the process (if it still runs); True when it was killed, not finished."""
    if proc.poll() is not None:
        return False
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    return proc.returncode == -signal.SIGKILL


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 60) -> str:
    """Read the child's stdout until a line starting with ``prefix``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"child exited before printing {prefix!r}")
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no {prefix!r} line within {timeout} s")


def assert_index_holds(
    index: Index,
    acknowledged: Mapping[str, str | None],
    in_flight: Mapping[str, tuple[str | None, str | None]],
    *,
    corpus: str = "default",
) -> dict[str, str | None]:
    """The index passes its integrity check, holds every acknowledged document exactly
    (None: acknowledged as deleted), each findable by its marker word, and every document
    of the interrupted operation is wholly in its old or wholly in its new state.

    Returns the state actually found for the in-flight documents."""
    check = index.verify()
    assert check.ok, check.to_dict()
    present = (
        {d.doc_id for d in index.list_documents(corpus=corpus, limit=10_000)}
        if corpus in index.corpora
        else set()
    )
    found: dict[str, str | None] = {}
    wanted: dict[str, tuple[str | None, ...]] = {k: (v,) for k, v in acknowledged.items()}
    wanted.update(in_flight)
    for doc_id, allowed in wanted.items():
        if doc_id not in present:
            assert None in allowed, f"{doc_id}: acknowledged but missing after the kill"
            found[doc_id] = None
            continue
        text = index.get_document(doc_id, corpus=corpus).text
        states = [canonicalize(t) if t is not None else None for t in allowed]
        assert text in states, f"{doc_id}: stored text is neither its old nor its new version"
        found[doc_id] = allowed[states.index(text)]
        hits = index.search(marker(doc_id), top_k=3, mode="keyword", corpora=[corpus])
        assert doc_id in {h.doc_id for h in hits}, f"{doc_id}: not found by its marker word"
        for hit in hits:
            assert index.resolve(hit) == hit.text
    extra = present - set(wanted)
    assert not extra, f"documents nobody wrote: {sorted(extra)[:5]}"
    if present:
        index.search("river stone", top_k=5)  # hybrid: the dense side reads every vector
    return found


def drain(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The rest of a dead child's output (read through the same buffered streams that
    ``wait_for_line`` used, so no line is lost)."""
    out = err = ""
    if proc.stdout is not None:
        out = proc.stdout.read()
        proc.stdout.close()
    if proc.stderr is not None:
        err = proc.stderr.read()
        proc.stderr.close()
    return out, err


def folder_state(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*.md"))
    }


def start_server(home: Path, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [str(SCRIPT), "serve", "--transport", "http", "--port", str(port)],
        env={**os.environ, "GUAIPECA_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx2.TransportError:
            pass
        assert proc.poll() is None, "the server exited at start"
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.1)


def make_service(
    root: Path,
    server: Mapping[str, Any] | None = None,
    docs: int = 20,
    upload: Mapping[str, Any] | None = None,
) -> Service:
    """A server-side service over corpus ``docs`` (uploads allowed), indexed with the
    deterministic hashing embedder, for in-process HTTP tests."""
    folder = root / "docs"
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    for i in range(docs):
        name = f"doc-{i}.md"
        (folder / name).write_text(doc_text(rng, name, 1, paragraphs=4), encoding="utf-8")
    section: dict[str, Any] = {"rate_limit_rps": 100_000, "rate_limit_burst": 100_000}
    section.update(server or {})
    settings = parse_settings(
        {
            "corpora": [{"name": "docs", "path": str(folder)}],
            "upload": {"allow": ["docs"], **(upload or {})},
            "storage": {"data_dir": str(root / "data")},
            "server": section,
        },
        env={},
        cwd=root,
    )
    loaded = LoadedSettings(settings, None, root / "data")
    index = Index(root / "data" / "index", embedder=HashingEmbedder(), settings=settings.engine())
    service = Service(index, loaded)
    service.reindex("docs")
    assert service.index.wait_for_embedding(60)  # the embedding phase runs behind the server
    return service


def rss_bytes() -> int:
    return int(psutil.Process().memory_info().rss)


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "6m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``folder`` for the block (a disk to fill); the test
    is skipped when mounting is not permitted (not root, or no CAP_SYS_ADMIN)."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill ({mounted.stderr.strip() or 'not root'})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def reset_peak_rss(pid: int) -> None:
    """Start the process's peak RSS (VmHWM) again from its current RSS (Linux clear_refs 5),
    so an earlier, higher peak does not hide the next one."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss_of(pid: int) -> int:
    """The process's peak RSS (VmHWM) in bytes since it started or since reset_peak_rss."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


class PeakRssGrowth:
    """How far a process's peak RSS rose over a ``with`` block above its RSS on entry
    (``growth``, bytes): the peak is reset on entry, so a transient peak inside the block
    counts even when it is freed before the block ends."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid if pid is not None else os.getpid()
        self.growth = 0

    def __enter__(self) -> PeakRssGrowth:
        reset_peak_rss(self.pid)
        self.before = int(psutil.Process(self.pid).memory_info().rss)
        return self

    def __exit__(self, *exc: object) -> None:
        self.growth = max(0, peak_rss_of(self.pid) - self.before)
