"""The packages import each other in one direction only (docs/architecture.md draws it), read from the sources:
a back-edge fails here naming the module, the line and the rule, whether the import is at the top or inside a
function."""

from __future__ import annotations

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "ptlite"

# Package (first part under ptlite; "ptlite" is the facade, ptlite/__init__.py) -> the packages it may import.
LEAVES = {"errors", "version"}  # modules every package may import
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "version": set(),
    "ops": set(),
    "ir": {"ops"},
    "passes": {"ir", "ops"},
    "format": {"ir", "ops"},
    "backends": {"passes", "ir", "ops"},
    "runtime": {"preprocess", "backends", "ir", "ops"},
    "frontend": {"runtime", "backends", "passes", "format", "ir", "ops"},
    "quantization": {"runtime", "backends", "passes", "ir", "ops"},
    "preprocess": set(),
    "ptlite": {"preprocess", "frontend", "quantization", "runtime", "backends", "passes", "format", "ir", "ops"},
    "tools": {"ptlite", "preprocess", "frontend", "quantization", "runtime", "backends", "passes", "format", "ir",
              "ops"},
}
CLI = "ptlite.tools.cli"
MAX_LINES = 600  # a module longer than this is split (generated data excepted)
GENERATED = {"ops/_table.py"}


def _module_name(path: pathlib.Path) -> str:
    parts = ["ptlite", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names imported from it) for every import in a module, functions' included."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [alias.name for alias in node.names]
            modules = [name for name in names if _is_module(f"{target}.{name}")]  # from ptlite import ops
            found += [(node.lineno, f"{target}.{name}", []) for name in modules]
            if len(modules) < len(names):
                found.append((node.lineno, target, [name for name in names if name not in modules]))
    return [(line, target, names) for line, target, names in found if target.split(".")[0] == "ptlite"]


def _is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split(".")[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ptlite"


def _sources() -> list[pathlib.Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_package_is_placed():
    packages = {_package(_module_name(p)) for p in _sources()}
    assert packages <= ALLOWED.keys(), f"packages the layering does not place: {packages - ALLOWED.keys()}"


def test_imports_go_down_the_layers_only():
    problems = []
    for path in _sources():
        module = _module_name(path)
        mine = _package(module)
        for line, target, _ in _imports(path):
            theirs = _package(target)
            if theirs != mine and theirs not in ALLOWED[mine] and theirs not in LEAVES:
                problems.append(f"{path.relative_to(SRC)}:{line}: {mine} imports {target} ({mine} may import "
                                f"{', '.join(sorted(ALLOWED[mine])) or 'no other package'})")
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_nothing_reaches_into_another_packages_private_names_or_the_cli():
    """Private names (`_x`) and private modules (`_derived`) stay inside their package; only the command line
    imports the command line."""
    problems = []
    for path in _sources():
        module = _module_name(path)
        mine = _package(module)
        for line, target, names in _imports(path):
            if target.startswith(CLI) and not module.startswith(CLI):
                problems.append(f"{path.relative_to(SRC)}:{line}: imports the command line ({target})")
            if _package(target) == mine:
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private or any(part.startswith("_") and not part.startswith("__") for part in target.split(".")):
                problems.append(f"{path.relative_to(SRC)}:{line}: imports {target} {private or ''} from another "
                                "package's private parts")
    assert not problems, "\n".join(problems)


def test_no_module_is_over_the_line_budget():
    long = [f"{p.relative_to(SRC)}: {n} lines" for p in _sources()
            if (n := len(p.read_text().splitlines())) > MAX_LINES and str(p.relative_to(SRC)) not in GENERATED]
    assert not long, f"modules over {MAX_LINES} lines (split them by concept):\n" + "\n".join(long)
