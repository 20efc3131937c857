"""Looking after an index: ``guaipeca drop`` (delete a corpus), ``migrate`` (to another
backend), ``reembed`` (after a model change), ``compact`` (reclaim deleted space) and
``check`` (integrity)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Annotated

import typer

from guaipeca.cli.context import (
    WaitOption,
    WaitTimeoutOption,
    current_settings,
    err,
    open_index,
    out,
    plural,
    writing,
)
from guaipeca.errors import GuaipecaError

if TYPE_CHECKING:
    from guaipeca.index import Index
    from guaipeca.store.embedded.reembed import ReembedReport


def drop(
    corpus: Annotated[str, typer.Argument(help="The corpus to delete from the index.")],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask for a confirmation first.")
    ] = False,
    wait: WaitOption = False,
    wait_timeout: WaitTimeoutOption = None,
) -> None:
    """Delete a corpus from the index, after asking. Its source files are not touched."""
    from guaipeca.cli.corpora import run_drop

    loaded = current_settings()
    idx = open_index(loaded, keyword_only=True)
    try:
        with writing(loaded, [corpus], wait=wait, timeout=wait_timeout):
            run_drop(loaded, idx, corpus, yes=yes, out=out, err=err)
    finally:
        idx.close()


def migrate(
    to: Annotated[str, typer.Option("--to", help="Target backend: qdrant, postgres or embedded.")],
    corpora: Annotated[
        list[str] | None, typer.Argument(help="The corpora to copy. Without one, every corpus.")
    ] = None,
    batch: Annotated[
        int, typer.Option(min=1, max=10_000, help="How many documents go in one write.")
    ] = 64,
    restart: Annotated[
        bool, typer.Option("--restart", help="Ignore the checkpoint of an earlier run.")
    ] = False,
    wait: WaitOption = False,
    wait_timeout: WaitTimeoutOption = None,
) -> None:
    """Copy the index to another backend (embedded <-> qdrant or postgres) without re-embedding;
    resumes after an interruption."""
    from guaipeca.cli.migrate import run_migrate

    loaded = current_settings()
    run_migrate(
        loaded,
        to,
        corpora,
        batch=batch,
        restart=restart,
        hold=lambda names: writing(loaded, names, wait=wait, timeout=wait_timeout),
        out=out,
        err=err,
    )


def reembed(
    corpora: Annotated[
        list[str] | None,
        typer.Argument(help="Corpora to re-embed (default: every corpus on another model)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    wait: WaitOption = False,
    wait_timeout: WaitTimeoutOption = None,
) -> None:
    """Re-embed stored chunks with the configured model (no re-conversion); resumes after an
    interruption, keyword search keeps working meanwhile, and the switch is atomic."""
    loaded = current_settings()
    idx = open_index(loaded)
    try:
        names = list(corpora) if corpora else list(idx.mismatched_corpora)
        reports = []
        with writing(loaded, names, wait=wait, timeout=wait_timeout):
            for name in names:
                report = _reembed_one(idx, name, quiet=as_json)
                reports.append(report)
                if not as_json:
                    out.print(_reembed_line(report))
        if as_json:
            out.print_verbatim(json.dumps([dataclasses.asdict(r) for r in reports]))
        elif not names:
            out.print("every corpus is already on its configured model")
    finally:
        idx.close()


def _reembed_one(idx: Index, name: str, *, quiet: bool) -> ReembedReport:
    from guaipeca.progress import JobProgress

    with JobProgress(console=err, quiet=quiet) as job:
        task = job.task(f"reembed {name}", "documents")
        report = idx.reembed(name, progress=task.update)
        task.finish()
    return report


def _reembed_line(report: ReembedReport) -> str:
    if not report.changed:
        return f"{report.corpus}: already on {report.model}"
    resumed = f", {report.resumed} resumed from an earlier run" if report.resumed else ""
    return (
        f"{report.corpus}: {report.documents} documents, {report.chunks} chunks re-embedded "
        f"with {report.model}{resumed}"
    )


def compact(
    corpora: Annotated[
        list[str] | None, typer.Argument(help="The corpora to compact. Without one, every corpus.")
    ] = None,
    wait: WaitOption = False,
    wait_timeout: WaitTimeoutOption = None,
) -> None:
    """Reclaim space left by deleted documents and refresh BM25 statistics."""
    loaded = current_settings()
    idx = open_index(loaded)
    try:
        names = corpora or idx.corpora
        with writing(loaded, names, wait=wait, timeout=wait_timeout):
            for name in names:
                before = next((c for c in idx.stats().corpora if c.name == name), None)
                idx.compact(name)
                after = next(c for c in idx.stats().corpora if c.name == name)
                freed = (before.deleted_slots if before else 0) - after.deleted_slots
                out.print(f"{name}: compacted ({freed} deleted chunk slots reclaimed)")
    finally:
        idx.close()


def check(
    corpora: Annotated[
        list[str] | None, typer.Argument(help="The corpora to check. Without one, every corpus.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check the index: catalog, vectors and keyword index agree, every chunk resolves.

    Exit code 1 when a problem is found (each is printed with how to repair it)."""
    loaded = current_settings()
    idx = open_index(loaded)
    try:
        reports = [idx.verify(name) for name in corpora] if corpora else [idx.verify()]
    finally:
        idx.close()
    checked = [c for r in reports for c in r.corpora]
    broken = {k: v for r in reports for k, v in r.broken.items()}
    ok = not broken and all(c.ok for c in checked)
    if as_json:
        data = {"ok": ok, **reports[0].to_dict()} if len(reports) == 1 else None
        if data is None:
            data = {"ok": ok, "corpora": [c for r in reports for c in r.to_dict()["corpora"]]}
            data["broken"] = broken
        out.print_verbatim(json.dumps(data, ensure_ascii=False))
    else:
        for c in checked:
            head = f"{c.name}: {plural(c.documents, 'document')}, {plural(c.chunks, 'chunk')}"
            out.print(f"{head}: ok" if c.ok else f"{head}: PROBLEMS")
            for problem in c.problems:
                out.print(f"  - {problem}")
        for name, reason in broken.items():
            out.print(f"{name}: cannot be opened: {reason}")
        if not checked and not broken:
            out.print("nothing indexed yet")
    if not ok:
        # An error (exit code 1), not typer.Exit: main() runs click without standalone mode.
        raise GuaipecaError(
            "the index has problems; re-index the corpora named above with "
            "'guaipeca index --force' (sources are read again)"
        )
