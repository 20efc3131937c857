"""The ``access:`` grants and the ``audit:`` section: parsed, and refused with one line
naming the key and the file."""

from __future__ import annotations

from pathlib import Path

from guaipeca.config import audit_path, load_settings
from support.config import config_error, write_config

_CORPORA = """\
corpora:
  - {name: contracts, path: a}
  - {name: handbook, path: b}
"""


def _write(tmp_path: Path, access: str) -> Path:
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "b").mkdir(exist_ok=True)
    return write_config(tmp_path, _CORPORA + access)


def test_grants_parse_with_every_kind_of_holder(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """access:
  - who: {group: legal}
    corpora: [contracts]
    can: [read, write]
  - who: {anyone: true}
    corpora: ["*"]
  - {who: {token: ci}, corpora: [handbook], can: [write]}
""",
    )
    grants = load_settings(path, env={}).settings.access
    assert grants is not None
    assert [(g.who.kind, g.who.value, g.corpora, g.can) for g in grants] == [
        ("group", "legal", ["contracts"], ["read", "write"]),
        ("anyone", "true", ["*"], ["read"]),
        ("token", "ci", ["handbook"], ["write"]),
    ]


def test_no_access_section_means_no_grants(tmp_path: Path) -> None:
    assert load_settings(_write(tmp_path, ""), env={}).settings.access is None


def test_a_grant_for_an_unknown_corpus_names_the_key_the_file_and_the_near_name(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, "access:\n  - {who: {group: legal}, corpora: [contract]}\n")
    message = config_error(path, env={})
    assert message.startswith("access.0.corpora.0: 'contract' is not a configured corpus")
    assert "did you mean 'contracts'?" in message
    assert str(path) in message


def test_a_misspelt_holder_kind_is_an_unknown_key_with_a_hint(tmp_path: Path) -> None:
    path = _write(tmp_path, "access:\n  - {who: {grup: legal}, corpora: [contracts]}\n")
    message = config_error(path, env={})
    assert "access.0.who.grup: unknown key (did you mean 'group'?)" in message


def test_a_holder_needs_exactly_one_kind(tmp_path: Path) -> None:
    path = _write(tmp_path, "access:\n  - {who: {group: a, role: b}, corpora: [contracts]}\n")
    assert "access.0.who: give exactly one of" in config_error(path, env={})
    path = _write(tmp_path, "access:\n  - {who: {}, corpora: [contracts]}\n")
    assert "(got none)" in config_error(path, env={})


def test_rights_are_read_or_write(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "access:\n  - {who: {anyone: true}, corpora: [handbook], can: [admin]}\n"
    )
    message = config_error(path, env={})
    assert message.startswith("access.0.can.0: must be one of 'read' or 'write'")


def test_the_audit_log_defaults_to_the_data_folder_and_follows_the_file(tmp_path: Path) -> None:
    loaded = load_settings(_write(tmp_path, ""), env={})
    assert audit_path(loaded.settings.audit, loaded.data_dir) == loaded.data_dir / "audit.jsonl"
    loaded = load_settings(_write(tmp_path, "audit: {file: logs/audit.jsonl}\n"), env={})
    assert audit_path(loaded.settings.audit, loaded.data_dir) == tmp_path / "logs/audit.jsonl"
    loaded = load_settings(_write(tmp_path, "audit: {enabled: false}\n"), env={})
    assert audit_path(loaded.settings.audit, loaded.data_dir) is None
