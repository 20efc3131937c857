"""The systemd unit: ``guaipeca install-service`` as a user runs it, the unit's content,
``systemd-analyze verify`` on it (where systemd is installed), and the example unit in
``deploy/`` kept equal to what the command writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guaipeca.cli.service_unit import UnitOptions, render_unit, unit_path
from guaipeca.errors import InvalidArgumentError

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "guaipeca"
ANALYZE = shutil.which("systemd-analyze")


def example_options(**changes: object) -> UnitOptions:
    values: dict[str, object] = {
        "executable": Path("/opt/guaipeca/bin/guaipeca"),
        "config": Path("/etc/guaipeca/guaipeca.yaml"),
        "home": Path("/var/lib/guaipeca"),
        "env_file": Path("/etc/guaipeca/env"),
        "user_unit": False,
        "user": "guaipeca",
    }
    values.update(changes)
    return UnitOptions(**values)  # type: ignore[arg-type]


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GUAIPECA_HOME": str(home), "XDG_CONFIG_HOME": str(home / "xdg")}
    env["HOME"] = str(home / "user-home")
    return subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    docs = tmp_path / "my docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    (home / "guaipeca.yaml").write_text(
        f"corpora:\n  - name: docs\n    path: {docs}\nupload:\n  allow: [docs]\n",
        encoding="utf-8",
    )
    return home


def test_the_example_unit_is_what_the_command_writes() -> None:
    shipped = (REPO / "deploy" / "guaipeca.service").read_text(encoding="utf-8")
    assert shipped.endswith(render_unit(example_options()))


@pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")
def test_install_service_prints_a_user_unit(home: Path) -> None:
    done = run(home, "install-service", "--print", "--memory-max", "1500M", "--port", "8123")
    assert done.returncode == 0, done.stderr
    unit = done.stdout
    assert f"ExecStart={SCRIPT.resolve()} --config {home / 'guaipeca.yaml'} serve" in unit
    assert "serve --transport http --port 8123\n" in unit
    assert "MemoryMax=1500M\nCPUQuota=200%\n" in unit
    assert "KillSignal=SIGTERM\n" in unit and "StandardError=journal\n" in unit
    assert f"EnvironmentFile=-{home / 'env'}\n" in unit
    assert "WantedBy=default.target\n" in unit
    assert "User=" not in unit and "ProtectSystem" not in unit  # sandboxing: system units


@pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")
def test_install_service_writes_the_unit_once(home: Path) -> None:
    done = run(home, "install-service")
    assert done.returncode == 0, done.stderr
    target = home / "xdg" / "systemd" / "user" / "guaipeca.service"
    assert target.is_file()
    assert "systemctl --user daemon-reload && systemctl --user enable --now guaipeca" in done.stdout
    again = run(home, "install-service")
    assert again.returncode == 1
    assert again.stderr.strip() == f"error: {target} already exists; use --force to overwrite it"
    assert run(home, "install-service", "--force").returncode == 0


@pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")
def test_a_system_unit_can_write_the_data_dir_and_upload_folders(home: Path) -> None:
    done = run(home, "install-service", "--system", "--print")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("ReadWritePaths="))
    assert line == f"ReadWritePaths={home} {home / 'data'} '{home.parent / 'my docs'}'"
    assert "User=guaipeca\n" in done.stdout and "ProtectSystem=strict\n" in done.stdout


@pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")
@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--memory-max", "2Q"], "--memory-max: '2Q' is not a systemd size"),
        (["--cpu-quota", "2"], "--cpu-quota: '2' is not a percentage"),
        (["--system", "--user-name", "Root!"], "--user: 'Root!' is not a valid user name"),
    ],
)
def test_bad_options_are_one_line_errors(home: Path, args: list[str], error: str) -> None:
    done = run(home, "install-service", "--print", *args)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {error}")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not SCRIPT.exists(), reason="the guaipeca script is not installed")
def test_a_service_needs_a_config_file(tmp_path: Path) -> None:
    done = run(tmp_path, "install-service", "--print")
    assert done.returncode == 1
    assert "no config file at" in done.stderr and "guaipeca init" in done.stderr


def test_percent_and_dollar_in_paths_are_escaped_for_systemd() -> None:
    unit = render_unit(example_options(config=Path("/etc/50%/$HOME.yaml")))
    assert "--config '/etc/50%%/$$HOME.yaml' serve" in unit


def test_relative_paths_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match=r"config: etc/x\.yaml is not an absolute path"):
        render_unit(example_options(config=Path("etc/x.yaml")))


def test_unit_paths() -> None:
    assert unit_path(False) == Path("/etc/systemd/system/guaipeca.service")
    assert unit_path(True, Path("/h/.config")) == Path("/h/.config/systemd/user/guaipeca.service")


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("user_unit", [False, True])
def test_systemd_accepts_the_unit(tmp_path: Path, user_unit: bool) -> None:
    # A real executable, so that verify checks everything else.
    unit = render_unit(
        example_options(executable=Path(sys.executable), home=tmp_path, user_unit=user_unit)
    )
    path = tmp_path / "guaipeca.service"
    path.write_text(unit, encoding="utf-8")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    args = [str(ANALYZE), *(["--user"] if user_unit else []), "verify", str(path)]
    done = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # verify only warns about values it ignores (a bad MemoryMax, an unknown key).
    problems = [line for line in done.stderr.splitlines() if str(path) in line]
    assert problems == [], done.stderr
