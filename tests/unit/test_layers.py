"""The layer rule of README.md's Layout: a module imports (at the top or inside a function) only
from its own layer or below."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "pt2aws"
#: README.md's layer table; a module's layer is its own entry's, else its folder's.
LAYERS = {
    **dict.fromkeys(("errors", "processes", "metrics", "plots"), 0),
    **dict.fromkeys(("serving.handler", "sizing.catalog"), 0),
    **dict.fromkeys(("rundir", "config", "report", "env"), 1),
    **dict.fromkeys(("inference", "serving"), 2),
    **dict.fromkeys(("data", "modeling"), 3),
    **dict.fromkeys(("train", "pipeline"), 4),
    "sizing": 5,
    "aws": 6,
    **dict.fromkeys(("lessons", "emulator"), 7),
    **dict.fromkeys(("cli", "__init__"), 8),
}


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(".".join(parts[:2]), LAYERS.get(parts[0]))


def imports(path: Path) -> set[str]:
    """The pt2aws modules ``path`` imports, anywhere in the file (``pt2aws.`` left off)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "pt2aws":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pt2aws."):
            found.add(node.module.removeprefix("pt2aws."))
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("pt2aws.") for a in node.names if "pt2aws." in a.name}
    return found


MODULES = sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_run_down_the_layers(path):
    module = ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
    own = layer(module)
    assert own is not None, f"{module} has no layer: add it to README.md's table and LAYERS"
    upward = {m: layer(m) for m in imports(path) if (layer(m) or 0) > own}
    assert not upward, f"{module} (layer {own}) imports from higher layers: {upward}"


def test_the_rule_catches_an_upward_import(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("def f():\n    from pt2aws.aws import deploy\n")
    assert imports(bad) == {"aws"} and layer("aws") > layer("train")
