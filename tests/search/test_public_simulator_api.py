"""search/ uses the simulator only through its public names (`simulator/__init__.py`)."""

from __future__ import annotations

import ast
from pathlib import Path

import simulator

SEARCH = Path(__file__).resolve().parents[2] / "search"


def _private_simulator_imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "simulator":
                if any(p.startswith("_") for p in parts[1:]):
                    found.append(f"{path.name}:{node.lineno} from {node.module}")
                elif len(parts) == 1:
                    found += [
                        f"{path.name}:{node.lineno} {a.name}"
                        for a in node.names
                        if a.name.startswith("_") or a.name not in simulator.__all__
                    ]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "simulator" and any(p.startswith("_") for p in parts[1:]):
                    found.append(f"{path.name}:{node.lineno} import {alias.name}")
    return found


def test_search_imports_no_private_simulator_module() -> None:
    files = sorted(SEARCH.rglob("*.py"))
    assert len(files) > 10  # the scan sees the package
    offenders = [hit for f in files for hit in _private_simulator_imports(f)]
    assert offenders == []


def test_scan_catches_a_private_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from simulator._kv import BlockPool\nimport simulator._request\n"
        "from simulator import Simulation, _engine\n"
    )
    assert len(_private_simulator_imports(bad)) == 3
