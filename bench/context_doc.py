"""The table of bench/context.py and its section in docs/benchmarks-quality.md (replaced on
each run, the rest of the file kept)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

SECTION = "## Long documents: evidence within a budget"


def _f(v: float) -> str:
    return f"{v:.3f}"


def markdown_table(result: dict[str, Any]) -> str:
    budgets = result["budgets"]
    head = ["system", "model", "hit@1", "hit@5", *(f"within {b:,}" for b in budgets),
            "chars returned", "p50 ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in result["rows"]:
        cells = [row["system"], row["model"]]
        if "not_available" in row:
            cells += ["not available"] + ["–"] * (len(head) - 3)
        else:
            cells += [_f(row["hit@1"]), _f(row["hit@5"])]
            cells += [_f(row["within"][str(b)]) if str(b) in row["within"] else "–"
                      for b in budgets]
            cells += [f"{row['mean_chars']:,.0f}", f"{row['latency_ms']['p50']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(result: dict[str, Any]) -> str:
    s, m = result["set"], result["machine"]
    load = ", ".join(f"{x:.1f}" for x in m["loadavg_at_start"])
    return f"""{SECTION}

Written by `bench/context.py` (raw results: `bench/results/context.json`); run on
{result['started']}, Guaipeca {result['guaipeca_commit']}, {m['nproc']} cores ({m['cpu']}),
{m['ram']} RAM, load average at the start {load}; {result['seconds'] / 60:.0f} minutes.

```bash
.venv/bin/{result['command']}
```

{s['name']} regrouped by title: {s['files']} Markdown files ({s['mean_chars']:,.0f} characters
on average, {s['max_chars']:,} at most), `# Title` then the paragraphs; {s['queries']} test
queries, each answered by its judged paragraph, whose span in its file is known. Guaipeca
indexes the folder as a new user does (`Index(path, language="{s['language']}")` and
`sync_folder`, default settings but the model). **within B** = the share of the answer
paragraph's characters among the first B characters of the results read in rank order;
**hit@1** / **hit@5** = the first / one of the first five results holds at least half of the
answer paragraph; **chars returned** = the top 5 (plain searches, peers), or the whole
budgeted result. Budgeted rows (`search(q, mode=M, budget=B)`, one call per B): within B from
the call with budget B; hit@k, chars and p50 from the call with budget
{result['table_budget']:,}. Peers: the top 5 chunks of the same files; their dense side embeds
the raw chunk text with the same model as the Guaipeca row, hybrid is RRF (k 60) of bm25s and
dense; "any" rows do not use the model. Times include the query's embedding; the cores were
shared with other work, so read them side by side only.

{markdown_table(result)}
"""


def write_section(path: Path, result: dict[str, Any]) -> None:
    """Replace the section (up to the next ``## `` heading) or append it."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    new = section(result)
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: new + "\n", text, count=1).rstrip("\n") + "\n"
    else:
        text = text.rstrip("\n") + "\n\n" + new
    path.write_text(text, encoding="utf-8")


README_MARK = "<!-- context-table -->"
README_END = "<!-- /context-table -->"
# The README's rows: the plain and budgeted Guaipeca searches and the peers, per model.
_README_ROWS = ("guaipeca-keyword", "guaipeca-*-budget", "bm25s-*", "hybrid-*")


def readme_table(result: dict[str, Any]) -> str:
    """The README's short table: within B and hit@1 of the plain default search, the
    budgeted searches and the peers."""
    import fnmatch

    budgets = result["budgets"]
    head = ["system", "model", *(f"within {b:,}" for b in budgets), "hit@1"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in result["rows"]:
        if "not_available" in row or not any(
            fnmatch.fnmatch(row["row"], pattern) for pattern in _README_ROWS
        ):
            continue
        cells = [row["system"], row["model"]]
        cells += [_f(row["within"][str(b)]) if str(b) in row["within"] else "–" for b in budgets]
        lines.append("| " + " | ".join([*cells, _f(row["hit@1"])]) + " |")
    return "\n".join(lines)


def write_readme_table(path: Path, result: dict[str, Any]) -> None:
    """Replace the table between the README's context-table marks (kept when absent)."""
    text = path.read_text(encoding="utf-8")
    start = text.find(README_MARK)
    if start < 0:
        return
    end = text.find(README_END, start)
    stop = end + len(README_END) if end >= 0 else start + len(README_MARK)
    new = f"{README_MARK}\n{readme_table(result)}\n{README_END}"
    path.write_text(text[:start] + new + text[stop:], encoding="utf-8")
