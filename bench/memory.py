"""Peak resident memory of the vector passes at 1M chunks: before and after, in one run.

    .venv/bin/python bench/memory.py [--rows 1000000] [--before 7036a1f]
                                     [--out bench/results/memory.json]

At 1M chunks the vector file is 1.5 GB (384-d float32), and every pass over all of it — the
damage check when an index opens, packing the sign bits for the binary prefilter, an exact
dense scan (``search.dense_scan: exact``, or any filtered search) — used to leave every page
it read mapped into the process: peak RSS 1,944 MB in bench/speed.py's 1M-chunk run. Since
then whole-file passes read the file through one block-sized buffer and scattered reads
(rescoring) release the mapping every ~65k rows (store/embedded/vectors.py: ``scores``,
``FileVectors.blocks``, ``FileVectors.gather``).

This bench builds one vector file of ``--rows`` random unit vectors (seeded; through
``FileVectors``, under /tmp/guaipeca-memory, reused by later runs), then, for the code of
``--before`` (a git revision, extracted with ``git archive``) and the code of this checkout,
runs the same sequence in a fresh process each and reads VmHWM/VmRSS after every step:

1. open the file and run the open-time damage check over every slot (as ``Corpus`` does);
2. pack the sign bits (the first binary-prefiltered search does this);
3. 200 binary-prefiltered dense searches (2,000 candidates rescored exactly each);
4. 20 exact dense scans of every row.

Times (p50 ms) of steps 3 and 4 are reported too: an exact scan of a file larger than 256 MB
now reads it through one buffer instead of the mapping, and the rescoring releases the
mapping every ~65k rows gathered. The whole-index figure (catalog,
BM25, the model) is bench/speed.py's, whose 1M-chunk build takes hours on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("GUAIPECA_MEMORY_DIR", "/tmp/guaipeca-memory"))
DIM = 384


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def status() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1]) // 1024
    return out


def build(rows: int) -> Path:
    from guaipeca.store.embedded.vectors import FileVectors

    path = WORK / f"vectors-{rows}.f32"
    done = path.with_suffix(".done")
    if done.exists():
        return path
    WORK.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    vectors = FileVectors(path, DIM, create=True)
    rng = np.random.default_rng(7)
    for start in range(0, rows, 65_536):
        n = min(65_536, rows - start)
        block = rng.standard_normal((n, DIM)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        vectors.write(np.arange(start, start + n, dtype=np.int64), block)
    vectors.flush()
    vectors.release()
    vectors.close()
    done.write_text(str(rows))
    return path


def worker(path: Path, rows: int) -> dict[str, Any]:
    """One code version, in a fresh process (PYTHONPATH picks the version)."""
    import guaipeca.store.embedded.vectors as vmod
    from guaipeca.store.embedded.binary import candidate_count, pack_signs, prefilter

    new = hasattr(vmod, "scores")
    out: dict[str, Any] = {"code": "after" if new else "before", "steps": {}}
    slots = np.arange(rows, dtype=np.int64)
    live = np.ones(rows, dtype=bool)
    rng = np.random.default_rng(1)
    queries = rng.standard_normal((220, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    out["steps"]["start"] = status()

    vectors = vmod.FileVectors(path, DIM)
    rows_map = vectors.rows()
    if new:
        bad, _ = vmod.damaged_rows(rows_map, slots, source=vectors)
    else:
        bad, _ = vmod.damaged_rows(rows_map, slots)
        vectors.release()
    assert len(bad) == 0
    out["steps"]["open check"] = status()

    # As Corpus._signs: the rows up to the high-water mark (the file's capacity is a power of 2).
    if new:
        signs = pack_signs(rows_map[:rows], vectors.blocks(rows))
    else:
        signs = pack_signs(rows_map[:rows])
    if not new:
        vectors.release()
    out["steps"]["pack signs"] = status()

    times = []
    for q in queries[:200]:
        t = time.perf_counter()
        cand = prefilter(signs, q, live, candidate_count(100))
        rescored = (vectors.gather(cand) if new else rows_map[cand]) @ q
        top = np.argsort(-rescored)[:100]
        times.append((time.perf_counter() - t) * 1000)
    assert len(top) == 100
    out["binary_scan_p50_ms"] = round(float(np.median(times)), 2)
    out["steps"]["200 binary scans"] = status()

    times = []
    for q in queries[200:]:
        t = time.perf_counter()
        s = vmod.scores(vectors, q, rows) if new else rows_map[:rows] @ q
        np.argpartition(-s, 100)[:100]
        times.append((time.perf_counter() - t) * 1000)
    out["exact_scan_p50_ms"] = round(float(np.median(times)), 2)
    out["steps"]["20 exact scans"] = status()
    out["peak_rss_mb"] = out["steps"]["20 exact scans"]["VmHWM"]
    return out


def run_version(src: Path, path: Path, rows: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--worker", str(path), "--rows", str(rows)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise SystemExit(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--before", default="7036a1f", help="git revision of the 'before' code")
    ap.add_argument("--out", default="bench/results/memory.json")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.rows)))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from quality import machine

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    path = build(args.rows)
    log(f"[memory] vector file {path} ({path.stat().st_size / 1e6:,.0f} MB)")
    result: dict[str, Any] = {
        "command": "python bench/memory.py " + " ".join(argv or sys.argv[1:]),
        "machine": machine(),
        "started": started,
        "rows": args.rows,
        "dim": DIM,
        "vector_file_mb": round(path.stat().st_size / 1e6),
        "before_revision": args.before,
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="guaipeca-before-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.before, "src"],
            capture_output=True,
            check=True,
        ).stdout
        Path(tmp, "src.tar").write_bytes(archive)
        with tarfile.open(Path(tmp, "src.tar")) as tar:
            tar.extractall(tmp, filter="data")
        for src in (Path(tmp) / "src", REPO / "src"):
            run = run_version(src, path, args.rows)
            log(f"[memory] {run['code']}: {json.dumps(run)}")
            result["runs"].append(run)
    result["loadavg_at_end"] = list(os.getloadavg())
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
