"""Wall time of one-shot CLI commands, each a new process (a cold start of Python, the
package and, when needed, the model; the operating system's file cache stays warm), beside
ripgrep searching the same folder's files.

    .venv/bin/python bench/cli_times.py [RUNS] [FOLDER]   # default: 7 runs, this repo's docs/

A fresh home folder gets FOLDER indexed as corpus 'default'; one unmeasured round warms the
file cache (and writes Python's bytecode caches, as an installed package has them), then each
command runs RUNS times, alternating, and the median and the spread are printed as a Markdown
table (docs/benchmarks.md, "CLI start-up"). The model is loaded only where the command needs
it: `search --mode keyword` opens the index without it. `rg` (Debian's `ripgrep`, not a
dependency: `apt-get install ripgrep`) reads every file of FOLDER for the same two words; it
is the floor a one-shot search from a new process can hope for, not a like-for-like
competitor (no ranking, no index, no PDF or image text). Without it its row says so.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "guaipeca"
QUERY = "exact span"
COMMANDS = {
    "python -c pass (the interpreter alone)": [sys.executable, "-c", "pass"],
    "guaipeca --help": [str(BIN), "--help"],
    "guaipeca status": [str(BIN), "status"],
    "guaipeca search --mode keyword": [str(BIN), "search", QUERY, "--mode", "keyword"],
    "guaipeca search --mode dense": [str(BIN), "search", QUERY, "--mode", "dense"],
    "guaipeca search (hybrid)": [str(BIN), "search", QUERY],
}


def _environment(home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUAIPECA_")}
    env["GUAIPECA_HOME"] = home
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its .pyc files
    return env


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    folder = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else REPO / "docs"
    commands = dict(COMMANDS)
    rg = shutil.which("rg")
    if rg:
        # Case-insensitive, either word, every file (hidden and ignored ones too, as the
        # index reads them); the output is thrown away as the CLI's is.
        commands[f"rg -i -e exact -e span (ripgrep {_rg_version(rg)})"] = [
            rg,
            "-i",
            "-uu",
            "-e",
            "exact",
            "-e",
            "span",
            str(folder),
        ]
    with tempfile.TemporaryDirectory() as home:
        env = _environment(home)
        subprocess.run(
            [str(BIN), "index", "--path", str(folder)],
            env=env,
            check=True,
            cwd=home,
            capture_output=True,
        )
        times: dict[str, list[float]] = {name: [] for name in commands}
        load_before = _load()
        for measured in [False] + [True] * runs:
            for name, args in commands.items():
                started = time.perf_counter()
                done = subprocess.run(args, env=env, cwd=home, capture_output=True, check=False)
                if done.returncode not in (0, 1):  # rg exits 1 when nothing matched
                    raise SystemExit(f"{name} failed: {done.stderr.decode()[-500:]}")
                if measured:
                    times[name].append(time.perf_counter() - started)
        load_after = _load()
    files = sum(1 for p in folder.rglob("*") if p.is_file())
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{runs} runs each over {folder.name}/ ({files} files); load average "
        f"{load_before} before, {load_after} after\n"
    )
    print("| command | median s | min–max s |")
    print("|---|---|---|")
    for name, values in times.items():
        print(
            f"| `{name}` | {statistics.median(values):.2f} | {min(values):.2f}–{max(values):.2f} |"
        )
    if not rg:
        print("| `rg` | not installed (apt-get install ripgrep) | |")
    return 0


def _rg_version(rg: str) -> str:
    out = subprocess.run([rg, "--version"], capture_output=True, text=True, check=False).stdout
    return out.split()[1] if out.split()[1:] else "?"


if __name__ == "__main__":
    sys.exit(main())
