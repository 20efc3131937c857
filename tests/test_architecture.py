"""The shape of src/guaipeca, stated as tests (docs/architecture.md says why).

* no function longer than MAX_FUNCTION_LINES, no module longer than MAX_FILE_LINES;
* no module imports another module's ``_private`` name (imports inside functions included);
* no import cycles: for every import edge a -> b, no chain leads from b back to a.

The layering itself (which package may import which) is import-linter's job
(``lint-imports``, contracts in pyproject.toml); these are the guarantees it does not check.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

import guaipeca

SRC = Path(guaipeca.__file__).resolve().parent
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 700

# Functions allowed past the limit, each with the reason it is one piece.
FUNCTION_EXEMPTIONS: dict[str, str] = {}
# Must stay empty: issue 18 split everything over the limits (add nothing here).
NOT_YET_SPLIT: set[str] = set()


def _modules() -> list[tuple[str, Path, ast.Module]]:
    return _parsed()


@functools.cache
def _parsed() -> list[tuple[str, Path, ast.Module]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append((".".join(parts), path, ast.parse(path.read_text(encoding="utf-8"), str(path))))
    return out


_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, _Function]]:
    """Every function with its qualified name (Class.method, outer.inner)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, _Function):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def test_the_source_is_found() -> None:
    names = [name for name, _, _ in _modules()]
    assert "guaipeca.index.facade" in names
    assert len(names) > 50


def _too_long() -> dict[str, int]:
    """Every function and module over its limit -> its length in lines."""
    long = {}
    for module, path, tree in _modules():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_FILE_LINES:
            long[module] = n
        for name, node in _functions(tree):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                long[f"{module}.{name}"] = lines
    return long


def test_at_most_six_modules_sit_at_the_top_level() -> None:
    # Issue 18: everything else lives in a folder named for its layer.
    top = sorted(p.stem for p in SRC.glob("*.py") if p.name != "__init__.py")
    assert top == ["agentic", "chunk", "errors", "evaluate", "ingest", "types"], top


def test_no_function_or_module_is_longer_than_the_limit() -> None:
    allowed = {*FUNCTION_EXEMPTIONS, *NOT_YET_SPLIT}
    over = {where: n for where, n in _too_long().items() if where not in allowed}
    assert over == {}, (
        f"over {MAX_FUNCTION_LINES} lines a function or {MAX_FILE_LINES} a module: {over}"
    )


def test_the_exemptions_are_still_needed() -> None:
    stale = {*FUNCTION_EXEMPTIONS, *NOT_YET_SPLIT} - set(_too_long())
    assert stale == set(), f"no longer over the limit, remove from the lists: {stale}"


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private_parts(dotted: str) -> list[int]:
    return [i for i, part in enumerate(dotted.split(".")) if _is_private(part)]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _crossing(importer: str, dotted: str) -> bool:
    """True when ``dotted`` (a module or module.name) reaches a private part from outside the
    module or package that owns it: ``a._b`` is private to package ``a``, ``a.b._c`` to module
    ``a.b``."""
    for i in _private_parts(dotted):
        owner = ".".join(dotted.split(".")[:i])
        if importer != owner and not importer.startswith(owner + "."):
            return True
    return False


def _private_imports(module: str, path: Path, tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):  # walk: imports inside functions count too
        if isinstance(node, ast.ImportFrom):
            source = _resolve(module, path, node)
            for alias in node.names:
                if _crossing(module, f"{source}.{alias.name}"):
                    yield f"{module}: from {source} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _crossing(module, alias.name):
                    yield f"{module}: import {alias.name}"


def test_no_private_name_is_imported_from_another_module() -> None:
    found = [
        line for module, path, tree in _modules() for line in _private_imports(module, path, tree)
    ]
    assert found == [], f"private names imported across modules: {found}"


def test_private_import_check_sees_imports_inside_functions() -> None:
    source = (
        "def f():\n    from guaipeca.index.facade import _hidden\n    import guaipeca.index._x\n"
    )
    found = list(_private_imports("guaipeca.agentic", SRC / "agentic.py", ast.parse(source)))
    assert sorted(found) == [
        "guaipeca.agentic: from guaipeca.index.facade import _hidden",
        "guaipeca.agentic: import guaipeca.index._x",
    ]
    # a private module used inside its own package, and a module's own private names, are fine
    inside = "from guaipeca.convert._limits import check\nfrom . import _repair\n"
    module, path = "guaipeca.convert.pdf._tables", SRC / "convert/pdf/_tables.py"
    assert list(_private_imports(module, path, ast.parse(inside))) == []


def _exception_classes(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            if node.name.endswith("Error") or any(
                b.endswith(("Error", "Exception")) for b in bases
            ):
                yield node.name


def test_every_error_lives_in_errors_py_and_is_a_guaipeca_error() -> None:
    elsewhere = [
        f"{module}.{name}"
        for module, _, tree in _modules()
        if module != "guaipeca.errors"
        for name in _exception_classes(tree)
        if not name.startswith("_")  # a private control-flow signal never leaves its module
    ]
    assert elsewhere == [], f"error classes outside errors.py: {elsewhere}"
    from guaipeca import errors

    classes = [
        v for v in vars(errors).values() if isinstance(v, type) and v.__module__ == errors.__name__
    ]
    assert len(classes) > 5
    assert all(issubclass(c, errors.GuaipecaError) for c in classes)


# Type aliases each module spells for itself.
_LOCAL_ALIASES = {"T", "F32"}


def test_every_public_constant_has_one_home() -> None:
    homes: dict[str, list[str]] = {}
    for module, _, tree in _modules():
        for node in tree.body:
            targets = (
                [t for t in node.targets if isinstance(t, ast.Name)]
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                else []
            )
            for target in targets:
                name = target.id
                if name.isupper() and not name.startswith("_") and name not in _LOCAL_ALIASES:
                    homes.setdefault(name, []).append(module)
    twice = {name: where for name, where in homes.items() if len(where) > 1}
    assert twice == {}, f"constants defined in more than one module: {twice}"


def test_the_version_is_read_from_the_installed_metadata_only() -> None:
    from importlib.metadata import version

    assert guaipeca.__version__ == version("guaipeca")
    written = [
        module
        for module, _, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
    ]
    assert written == ["guaipeca"]


# Test folders that are not about one package: whole-system checks, shared helpers and the
# pure parts of bench/'s scripts.
_CROSS_CUTTING = {"reliability", "deploy", "support", "data", "bench"}


def test_the_tests_mirror_the_source_folder_for_folder() -> None:
    tests = Path(__file__).resolve().parent
    strays = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.parent.relative_to(tests)
        if rel.parts and rel.parts[0] in _CROSS_CUTTING:
            continue
        if not (SRC / rel).is_dir():
            strays.append(str(path.relative_to(tests)))
    assert strays == [], f"test modules in folders with no package of the same path: {strays}"


def test_every_package_has_tests_under_its_own_path() -> None:
    # The other way round: no package's tests live only in a parent's or a sibling's folder.
    tests = Path(__file__).resolve().parent
    bare = [
        str(init.parent.relative_to(SRC))
        for init in sorted(SRC.rglob("__init__.py"))
        if not any((tests / init.parent.relative_to(SRC)).rglob("test_*.py"))
    ]
    assert bare == [], f"packages with no test module under tests/<their path>: {bare}"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("guaipeca", cache_dir=None)


def test_no_import_cycles(graph: grimp.ImportGraph) -> None:
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported == importer:
                continue
            chain = graph.find_shortest_chain(importer=imported, imported=importer)
            if chain is not None:
                cycles.append(" -> ".join((importer, *chain)))
    assert cycles == [], f"import cycles: {cycles}"
