"""A systemd unit for ``guaipeca serve`` (§9.1), written by ``guaipeca install-service``.

Two kinds:

- a **user** unit (``~/.config/systemd/user/guaipeca.service``): no root needed, runs as
  you, reads your config; ``loginctl enable-linger`` keeps it up after you log out;
- a **system** unit (``/etc/systemd/system/guaipeca.service``): runs as a dedicated user,
  with systemd's sandboxing (read-only system, private /tmp, no new privileges).

Both log to the journal (``journalctl [--user] -u guaipeca``), stop with SIGTERM (the
server lets requests in flight finish, then closes the index) and cap memory and CPU
with ``MemoryMax`` and ``CPUQuota``. Secrets stay out of the unit: it reads
``GUAIPECA_AUTH_TOKEN`` / ``GUAIPECA_JWT_SECRET`` from an optional environment file.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from pathlib import Path
from typing import Final

from guaipeca.errors import InvalidArgumentError

__all__ = ["UnitOptions", "render_unit", "unit_path"]

#: systemd's memory sizes (bytes, K, M, G, T, or a percentage of RAM, or infinity).
_MEMORY: Final = re.compile(r"^(\d+(\.\d+)?[KMGT]?|\d{1,3}%|infinity)$")
#: CPUQuota: a percentage of one CPU (200% = two cores).
_CPU: Final = re.compile(r"^\d{1,5}%$")


@dataclasses.dataclass(frozen=True)
class UnitOptions:
    """What goes into the unit. Paths must be absolute."""

    executable: Path
    config: Path
    home: Path
    env_file: Path
    user_unit: bool = True
    user: str | None = None
    memory_max: str = "2G"
    cpu_quota: str = "200%"
    host: str | None = None
    port: int | None = None
    #: Folders a system unit may write besides ``home``: the data dir, upload corpora.
    writable: tuple[Path, ...] = ()
    stop_timeout: int = 30


def _quote(value: str) -> str:
    # systemd splits ExecStart like a shell (quotes, no expansion); '%' and '$' are its own.
    return shlex.quote(value.replace("%", "%%").replace("$", "$$"))


def _check(options: UnitOptions) -> None:
    named = [(n, getattr(options, n)) for n in ("executable", "config", "home", "env_file")]
    for name, path in [*named, *(("writable", w) for w in options.writable)]:
        if not path.is_absolute():
            raise InvalidArgumentError(f"{name}: {path} is not an absolute path")
        if "\n" in str(path):
            raise InvalidArgumentError(f"{name}: a path with a line break cannot go in a unit")
    if not _MEMORY.match(options.memory_max):
        raise InvalidArgumentError(
            f"--memory-max: {options.memory_max!r} is not a systemd size (e.g. 2G, 1500M, 50%)"
        )
    if not _CPU.match(options.cpu_quota):
        raise InvalidArgumentError(
            f"--cpu-quota: {options.cpu_quota!r} is not a percentage (e.g. 200% = two cores)"
        )
    if options.user is not None and not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", options.user):
        raise InvalidArgumentError(f"--user: {options.user!r} is not a valid user name")


def render_unit(options: UnitOptions) -> str:
    """The unit file's text.

    Raises:
        InvalidArgumentError: a relative path, or a size or quota systemd would refuse.
    """
    _check(options)
    command = [
        str(options.executable),
        "--config",
        str(options.config),
        "serve",
        "--transport",
        "http",
    ]
    if options.host:
        command += ["--host", options.host]
    if options.port:
        command += ["--port", str(options.port)]
    exec_start = " ".join(_quote(c) for c in command)
    lines = [
        "# Guaipeca as a service; written by `guaipeca install-service`.",
        "# Logs: journalctl " + ("--user " if options.user_unit else "") + "-u guaipeca -f",
        "[Unit]",
        "Description=Guaipeca hybrid search (MCP server over HTTP)",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=exec",
    ]
    if not options.user_unit:
        lines += [f"User={options.user or 'guaipeca'}", f"Group={options.user or 'guaipeca'}"]
    lines += [
        f"Environment={_quote('GUAIPECA_HOME=' + str(options.home))}",
        "Environment=PYTHONUNBUFFERED=1",
        "# Secrets (GUAIPECA_AUTH_TOKEN=..., GUAIPECA_JWT_SECRET=...), one per line, mode 600:",
        f"EnvironmentFile=-{options.env_file}",
        f"ExecStart={exec_start}",
        "# SIGTERM: stop accepting, let requests in flight finish, close the index.",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={options.stop_timeout}",
        "Restart=on-failure",
        "RestartSec=5",
        "# Resource caps: the model and the index's memory maps live within MemoryMax.",
        f"MemoryMax={options.memory_max}",
        f"CPUQuota={options.cpu_quota}",
        "# Event streams and connections are budgeted within LimitNOFILE (systemd's default",
        "# soft limit is 1024); TasksMax bounds the threads (searches, conversions, OCR).",
        "LimitNOFILE=65536",
        "TasksMax=512",
        "StandardOutput=journal",
        "StandardError=journal",
        "SyslogIdentifier=guaipeca",
    ]
    if not options.user_unit:
        lines += [
            "# Sandboxing: the system is read-only; the data dir and the corpus folders",
            "# (for uploads) must be listed in ReadWritePaths.",
            "NoNewPrivileges=yes",
            "PrivateTmp=yes",
            "PrivateDevices=yes",
            "ProtectSystem=strict",
            "ProtectHome=read-only",
            "ReadWritePaths="
            + " ".join(_quote(str(p)) for p in dict.fromkeys((options.home, *options.writable))),
            "ProtectKernelTunables=yes",
            "ProtectKernelModules=yes",
            "ProtectControlGroups=yes",
            "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
            "RestrictNamespaces=yes",
            "LockPersonality=yes",
        ]
    lines += [
        "",
        "[Install]",
        "WantedBy=" + ("default.target" if options.user_unit else "multi-user.target"),
        "",
    ]
    return "\n".join(lines)


def unit_path(user_unit: bool, config_home: Path | None = None) -> Path:
    """Where systemd looks for the unit: the user's (``$XDG_CONFIG_HOME/systemd/user``) or
    the system's folder."""
    if not user_unit:
        return Path("/etc/systemd/system/guaipeca.service")
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = config_home or (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".config")
    return base / "systemd" / "user" / "guaipeca.service"
