"""``guaipeca serve`` (the MCP server over stdio, HTTP or both, optionally re-indexing on
change) and ``guaipeca install-service`` (a systemd unit that runs it: service_unit.py)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from guaipeca.cli.context import current_settings, log, open_index, out, state
from guaipeca.config import config_path
from guaipeca.errors import GuaipecaError

if TYPE_CHECKING:
    import socket

    from guaipeca.config import LoadedSettings
    from guaipeca.index import Index


def serve(
    transport: Annotated[
        str | None,
        typer.Option(help="stdio (one local agent), http, or both (default: server.transport)."),
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="HTTP interface (default: server.host, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="HTTP port (default: server.port, 8090).")
    ] = None,
    watch: Annotated[
        bool | None,
        typer.Option("--watch/--no-watch", help="Re-index corpora when their files change."),
    ] = None,
) -> None:
    """Run the MCP server: stdio, Streamable HTTP at /mcp and legacy SSE at /sse."""
    import anyio

    from guaipeca.server import Service, build_server
    from guaipeca.server.idle import IdleTrim, trim_when_idle

    loaded = current_settings()
    conf = loaded.settings.server
    if (mode := transport or conf.transport) not in ("stdio", "http", "both"):
        raise typer.BadParameter("must be stdio, http or both", param_hint="--transport")
    address = (host or conf.host, port or conf.port)
    sockets, idx = _bind_then_open(loaded, address if mode != "stdio" else None)
    service = Service(idx, loaded)
    stop = threading.Event()
    if conf.watch if watch is None else watch:
        threading.Thread(target=_watch, args=(service, stop), daemon=True, name="watch").start()

    async def run() -> None:
        from guaipeca.server.http import serve_http

        if mode == "http":
            await serve_http(service, *address, sockets)
            return
        server = build_server(service)

        async def stop_on_sigterm(scope: anyio.CancelScope) -> None:
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    stopping.set()
                    scope.cancel()
                    return

        async def http_then_stop(scope: anyio.CancelScope) -> None:
            await serve_http(service, *address, sockets)
            stopping.set()
            scope.cancel()  # SIGTERM/SIGINT stopped HTTP (gracefully): stop stdio too

        # SIGTERM (systemd, docker stop) ends the server by returning, so the index is
        # closed below; over HTTP, uvicorn first lets requests in flight finish.
        async with anyio.create_task_group() as tg:
            if mode == "stdio":
                tg.start_soon(stop_on_sigterm, tg.cancel_scope)
                # Over HTTP uvicorn's tick drives this; stdio has no tick, so a timer does.
                trim = IdleTrim(service.tool_calls, idx.release_memory, conf.idle_trim_seconds)
                tg.start_soon(trim_when_idle, trim)
            else:
                tg.start_soon(http_then_stop, tg.cancel_scope)
            await server.run_stdio_async()
            tg.cancel_scope.cancel()  # the agent closed stdio: stop serving HTTP too

    # The MCP SDK reads stdin in a worker thread that cancellation cannot interrupt: once
    # a signal stopped everything else, a stdin left open by the agent must not keep the
    # process (and the index) open. Searches still running get their deadline first.
    stopping, finished = threading.Event(), threading.Event()
    grace = conf.search_timeout_seconds + 5.0
    threading.Thread(
        target=_exit_when_stuck, args=(stopping, finished, grace, stop, idx), daemon=True
    ).start()
    try:
        anyio.run(run)
    finally:
        finished.set()
        stop.set()
        idx.close()


def _bind_then_open(
    loaded: LoadedSettings, address: tuple[str, int] | None
) -> tuple[list[socket.socket], Index]:
    """The HTTP sockets bound (none without ``address``), then the index opened: a port
    in use is one line (exit 1) before the model loads, and the URL is announced only
    once the port is ours.

    Raises:
        GuaipecaError: the port is in use, the address cannot be bound, or the index
            cannot be opened.
    """
    from guaipeca.server.bind import listen

    sockets = listen(*address) if address is not None else []
    try:
        return sockets, open_index(loaded, tolerate_down=True)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise


def _exit_when_stuck(
    stopping: threading.Event,
    finished: threading.Event,
    grace: float,
    stop: threading.Event,
    idx: Index,
) -> None:
    stopping.wait()
    if finished.wait(grace):
        return
    log.info("stopped; stdin is still open: closing the index and exiting")
    stop.set()
    idx.close()
    os._exit(0)


def _watch(service: Any, stop: threading.Event, interval: float = 5.0) -> None:
    """server.watch: re-sync every configured corpus every few seconds (unchanged files are
    not read), in the background; searches keep answering meanwhile."""
    while not stop.wait(interval):
        for corpus in service.settings.corpora:
            try:
                report = service.reindex(corpus.name)
                if report.touched:
                    log.info(
                        "watch: %s re-indexed (%d added, %d changed, %d removed)",
                        corpus.name,
                        report.added,
                        report.changed,
                        report.removed,
                    )
            except GuaipecaError as exc:
                log.warning("watch: %s: %s", corpus.name, exc)


def install_service(
    system: Annotated[
        bool,
        typer.Option(
            "--system", help="A system unit (/etc/systemd/system, as --user-name); default: yours."
        ),
    ] = False,
    user_name: Annotated[
        str, typer.Option("--user-name", help="The account a --system unit runs as.")
    ] = "guaipeca",
    memory_max: Annotated[
        str, typer.Option(help="MemoryMax: RAM cap (e.g. 2G; 1G is enough for ~100k chunks).")
    ] = "2G",
    cpu_quota: Annotated[
        str, typer.Option(help="CPUQuota: CPU cap, a percentage of one core (200% = two).")
    ] = "200%",
    host: Annotated[str | None, typer.Option(help="--host for serve (default: config).")] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=1, max=65535, help="The port the unit's serve listens on (default: the config's)."
        ),
    ] = None,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the unit instead of writing it.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing unit.")] = False,
) -> None:
    """Write a systemd unit that runs 'guaipeca serve --transport http' (journal logs,
    graceful stop on SIGTERM, MemoryMax/CPUQuota caps), then print how to start it."""
    import shutil

    from guaipeca.cli.service_unit import UnitOptions, render_unit, unit_path
    from guaipeca.config import home_dir

    path = config_path(state.config).resolve()
    if not path.is_file():
        raise GuaipecaError(
            f"no config file at {path}: a service needs one (write it with 'guaipeca init', "
            "list your corpora, then run this again)"
        )
    loaded = current_settings(check_paths=True)  # a broken config fails here, not at every restart
    s = loaded.settings
    uploads = [c.path for c in s.corpora if c.name in s.upload.allow and c.path.is_absolute()]
    script = shutil.which("guaipeca") or sys.argv[0]
    home = home_dir().resolve()
    options = UnitOptions(
        executable=Path(script).resolve(),
        config=path,
        home=home,
        env_file=home / "env",
        user_unit=not system,
        user=user_name if system else None,
        memory_max=memory_max,
        cpu_quota=cpu_quota,
        host=host,
        port=port,
        writable=(loaded.data_dir.resolve(), *uploads),
    )
    text = render_unit(options)
    if print_only:
        sys.stdout.write(text)
        return
    target = unit_path(user_unit=not system)
    if target.exists() and not force:
        raise GuaipecaError(f"{target} already exists; use --force to overwrite it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except PermissionError:
        raise GuaipecaError(f"cannot write {target}: run as root for --system") from None
    ctl = "systemctl" if system else "systemctl --user"
    out.print(f"wrote {target}")
    out.print("start it now and at boot:")
    out.print(f"  {ctl} daemon-reload && {ctl} enable --now guaipeca")
    out.print(f"  journalctl {'' if system else '--user '}-u guaipeca -f    # its logs")
    if not system:
        out.print("  loginctl enable-linger $USER   # keep it running after you log out")
    out.print(f"secrets (GUAIPECA_AUTH_TOKEN=...) go in {options.env_file} (chmod 600)")
