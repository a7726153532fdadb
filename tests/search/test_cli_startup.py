"""Start-up: `llmcap --help` and `llmcap simulate` load only what they use."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from search._errors import user_error_classes
from search.cli import LAZY_COMMANDS, cli

ROOT = Path(__file__).resolve().parents[2]
# the results database, the cluster, the optimiser, plotting, the profiler, measured tables,
# and pandas (the summary is numpy; tables are built only when written)
NEVER_FOR_SIMULATE = (
    "sqlalchemy", "alembic", "ray", "optuna", "matplotlib", "plotly", "torch",
    "aiconfigurator_core", "search._db", "pandas",
)  # fmt: skip


def _loaded_after(argv: list[str]) -> list[str]:
    """The heavy modules loaded by running `llmcap ARGV` in a fresh interpreter."""
    code = (
        "import json, sys\n"
        "from search.cli import cli\n"
        "try:\n"
        f"    cli.main({argv!r}, prog_name='llmcap')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"names = {[*NEVER_FOR_SIMULATE, 'numpy']!r}\n"
        "sys.stderr.write(json.dumps([n for n in names if n in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_help_loads_no_heavy_module() -> None:
    assert _loaded_after(["--help"]) == []


def test_simulate_loads_no_database_cluster_or_plotting() -> None:
    loaded = _loaded_after(["simulate", "--num-requests", "20", "--qps", "2", "--json"])
    assert "numpy" in loaded  # it did simulate
    assert not set(loaded) & set(NEVER_FOR_SIMULATE), loaded


def test_simulate_of_a_trace_loads_no_pandas(tmp_path: Path) -> None:
    """Plain trace CSVs (Azure's, Vidur's) are read without pandas."""
    trace = tmp_path / "azure.csv"
    rows = [f"2023-11-16 18:15:{i:02d}.{i * 37:07d},{100 + 7 * i},{5 + i}" for i in range(30)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    loaded = _loaded_after(["simulate", "--workload", str(trace), "--json"])
    assert "numpy" in loaded
    assert not set(loaded) & set(NEVER_FOR_SIMULATE), loaded


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_listed_help_is_the_commands_own(name: str) -> None:
    module, attribute = LAZY_COMMANDS[name][0].split(":")
    command = getattr(importlib.import_module(module), attribute)
    assert command.name == name
    first_line = (command.help or "").strip().splitlines()[0]
    assert LAZY_COMMANDS[name][1] == first_line
    assert cli.get_command(None, name) is command


@pytest.mark.parametrize("path", user_error_classes())
def test_every_user_error_class_exists(path: str) -> None:
    module, name = path.split(":")
    error = getattr(importlib.import_module(module), name)
    assert isinstance(error, type) and issubclass(error, Exception)


def test_the_cli_spells_out_the_length_spec_forms_as_the_workloads_package_does() -> None:
    """The CLI writes the length-spec forms out (importing them would load numpy for
    `llmcap --help`); they are workloads' own, in the epilog and the options' help."""
    from search import cli as cli_module
    from workloads import LENGTH_SPEC_FORMS

    assert cli_module.LENGTH_SPEC_FORMS == LENGTH_SPEC_FORMS
    assert LENGTH_SPEC_FORMS in cli_module.SIMULATE_EPILOG
    simulate = cli.commands["simulate"]
    prompt_len = next(p for p in simulate.params if p.name == "prompt_len")
    assert LENGTH_SPEC_FORMS in (prompt_len.help or "")
