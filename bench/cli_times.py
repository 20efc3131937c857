"""Wall time of one-shot CLI commands, each a new process (a cold start of Python, the
package and, when needed, the model; the operating system's file cache stays warm).

    .venv/bin/python bench/cli_times.py [RUNS]      # default 7 runs of each command

A fresh home folder gets this repository's docs/ indexed as corpus 'default', then each
command runs RUNS times, alternating, and the median and the spread are printed as a
Markdown table (docs/benchmarks.md, "CLI start-up"). The model is loaded only where the
command needs it: `search --mode keyword` opens the index without it.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "guaipeca"
COMMANDS = {
    "guaipeca --help": ["--help"],
    "guaipeca status": ["status"],
    "guaipeca search --mode keyword": ["search", "exact span", "--mode", "keyword"],
    "guaipeca search --mode dense": ["search", "exact span", "--mode", "dense"],
    "guaipeca search (hybrid)": ["search", "exact span"],
}


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GUAIPECA_")}
        env["GUAIPECA_HOME"] = home
        subprocess.run(
            [str(BIN), "index", "--path", str(REPO / "docs")],
            env=env,
            check=True,
            cwd=home,
            capture_output=True,
        )
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(runs):
            for name, args in COMMANDS.items():
                started = time.perf_counter()
                subprocess.run(
                    [str(BIN), *args], env=env, check=True, cwd=home, capture_output=True
                )
                times[name].append(time.perf_counter() - started)
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{runs} runs each\n"
    )
    print("| command | median s | min–max s |")
    print("|---|---|---|")
    for name, values in times.items():
        print(
            f"| `{name}` | {statistics.median(values):.2f} | {min(values):.2f}–{max(values):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
