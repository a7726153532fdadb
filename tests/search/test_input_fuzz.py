"""Bad input never ends in a traceback: mutated specs and simulate command lines (hypothesis).

Every case exits 0 (valid and small) or 2 with an `error:` message; none raises.  The cases
come from tests/search/input_mutations.py; benchmarks/fuzz_inputs.py runs many more of them
as subprocesses under time and memory limits.
"""

from __future__ import annotations

import random
from pathlib import Path

from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search.cli import cli
from tests.search.input_mutations import fill, mutate_spec, prepare_scratch, simulate_args

FUZZ_SETTINGS = settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def assert_clean_exit(result: Result, args: list[str]) -> None:
    shown = " ".join(a if len(a) < 80 else a[:40] + "..." for a in args)
    output = result.output
    assert "Traceback" not in output, f"{shown}\n{output}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{shown}: raised {result.exception!r}\n{output}")
    assert result.exit_code in (0, 2), f"{shown}: exit {result.exit_code}\n{output}"
    if result.exit_code == 2:
        assert "rror" in output, f"{shown}: exit 2 without a message\n{output}"


@FUZZ_SETTINGS
@given(rng=st.randoms(use_true_random=False))
def test_mutated_specs_validate_or_fail_cleanly(rng: random.Random, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(mutate_spec(rng))
    args = ["search", "validate", str(spec)]
    assert_clean_exit(CliRunner().invoke(cli, args), args)


@FUZZ_SETTINGS
@given(rng=st.randoms(use_true_random=False))
def test_simulate_command_lines_run_or_fail_cleanly(rng: random.Random, tmp_path: Path) -> None:
    prepare_scratch(tmp_path, rng)
    args = fill(simulate_args(rng), tmp_path)
    if "--num-requests" not in args:  # keep the in-process runs short
        args += ["--num-requests", "20"]
    assert_clean_exit(CliRunner().invoke(cli, args), args)
