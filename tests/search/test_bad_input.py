"""Bad input ends in one clear message and exit 2, before any work is done: unreadable files,
limits with reasons, duplicate keys, unwritable outputs, reads that never create anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from search._db import DatabaseError, open_database
from search._limits import MAX_NUM_REQUESTS, MAX_REPLICAS
from search.cli import cli
from sku_catalog import YamlInputError
from sku_catalog._yaml import MAX_YAML_DEPTH, parse_yaml

from .conftest import TINY_SPEC

SMALL = ["--num-requests", "20", "--qps", "2"]


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def failure(*args: str) -> str:
    """The output of a command that must fail with exit 2 and a message."""
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "rror" in result.output
    return " ".join(result.output.split())  # rich and click wrap long lines


def spec_file(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "spec.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


# -- reading files -----------------------------------------------------------------------------


def test_a_spec_that_is_not_utf8(tmp_path: Path) -> None:
    message = failure("search", "validate", spec_file(tmp_path, b"\xff\xfe"))
    assert "is not UTF-8 text (byte 0xff at offset 0)" in message


def test_a_deeply_nested_spec(tmp_path: Path) -> None:
    message = failure("search", "validate", spec_file(tmp_path, "a: " + "[" * 10**5 + "]" * 10**5))
    assert f"nested more than {MAX_YAML_DEPTH} levels deep" in message


def test_a_spec_path_too_long_for_the_os(tmp_path: Path) -> None:
    message = failure("search", "validate", str(tmp_path / ("x" * 5000 + ".yaml")))
    assert "File name too long" in message
    assert len(message) < 500  # the path is shown cut short


def test_duplicate_keys_in_a_spec(tmp_path: Path) -> None:
    text = yaml.safe_dump(TINY_SPEC) + "name: again\n"
    assert "found duplicate key 'name'" in failure("search", "validate", spec_file(tmp_path, text))


def test_duplicate_keys_in_a_simulate_config(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("tp: 1\ntp: 2\n")
    assert "found duplicate key 'tp'" in failure("simulate", "--config", str(config), *SMALL)


ALIAS_ROWS = [
    f"{k}: &{k} [{', '.join([f'*{p}'] * 10)}]\n" for p, k in zip("abcd", "bcde", strict=True)
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(ALIAS_ROWS),
            "values once its aliases",
        ),
        ("a: &a [*a]\n", "refers to a value that holds it"),
    ],
)
def test_aliases_that_expand_without_bound(text: str, expected: str) -> None:
    with pytest.raises(YamlInputError, match=expected):
        parse_yaml(text, "x.yaml")


def test_a_model_config_nested_too_deeply(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text("[" * 10**5 + "]" * 10**5)
    assert "nested too deeply" in failure("simulate", "--model", str(config), *SMALL)


# -- limits --------------------------------------------------------------------------------


def test_too_many_requests_is_refused_with_the_reason() -> None:
    message = failure("simulate", "--qps", "2", "--num-requests", "1000000000000")
    assert f"at most {MAX_NUM_REQUESTS:,} requests" in message
    assert "12 PB" in message


def test_too_many_replicas_is_refused() -> None:
    message = failure("simulate", *SMALL, "--replicas", "1000000")
    assert f"replicas: at most {MAX_REPLICAS:,} replicas" in message


def test_num_requests_given_as_a_huge_float_fails_validate(tmp_path: Path) -> None:
    spec = yaml.safe_dump(TINY_SPEC | {"workload": {"source": "chat", "num_requests": 1e30}})
    message = failure("search", "validate", spec_file(tmp_path, spec))
    assert "workload.num_requests:" in message


def test_a_space_too_large_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    space = {"tp": list(range(1, 101)), "pp": list(range(1, 101)), "replicas": list(range(1, 101))}
    spec = spec_file(tmp_path, yaml.safe_dump(TINY_SPEC | {"space": space}))
    message = failure("search", "validate", spec)
    assert "space: 2,000,000 configurations" in message
    assert "over max_configurations 100,000" in message


def test_max_configurations_is_overridden_on_the_command_line(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, yaml.safe_dump(TINY_SPEC))
    assert "over max_configurations 3" in failure(
        "search", "validate", spec, "--max-configurations", "3"
    )


@pytest.mark.parametrize("cv", ["1e-300", "1e300"])
def test_gamma_burstiness_out_of_range(cv: str) -> None:
    message = failure("simulate", *SMALL, "--arrival", "gamma", "--cv", cv)
    assert "cv must be between 0.001 and 1000" in message


def test_validate_exits_2_when_nothing_can_run(tmp_path: Path) -> None:
    spec = TINY_SPEC | {"model": "meta-llama/Llama-2-70b-hf", "budget": {"max_gpus": 1}}
    message = failure("search", "validate", spec_file(tmp_path, yaml.safe_dump(spec)))
    assert "none of its 8 configurations can run (4 budget, 4 memory)" in message


def test_validate_builds_the_workload_as_run_does(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("a,b\n1,2\n")
    spec = TINY_SPEC | {"workload": {"source": str(trace), "num_requests": 10}}
    message = failure("search", "validate", spec_file(tmp_path, yaml.safe_dump(spec)))
    assert "cannot tell its format" in message


# -- output files -----------------------------------------------------------------------------


def test_an_output_folder_that_does_not_exist_is_refused_before_simulating(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "x.json"
    message = failure("simulate", *SMALL, "--trace-out", str(out))
    assert "does not exist (llmcap does not create folders" in message
    assert "TTFT" not in message  # nothing was simulated
    assert not out.parent.exists()


@pytest.mark.parametrize(("option", "name"), [("--trace-out", "x.csv"), ("--requests-out", "x.t")])
def test_an_output_type_llmcap_does_not_write(option: str, name: str, tmp_path: Path) -> None:
    assert "unknown file type" in failure("simulate", *SMALL, option, str(tmp_path / name))


def test_a_write_that_fails_says_why(tmp_path: Path) -> None:
    full = tmp_path / "full.json"
    full.symlink_to("/dev/full")
    message = failure("simulate", *SMALL, "--json", "--trace-out", str(full))
    assert f"cannot write --trace-out {full}: No space left on device" in message


def test_requests_out_parquet(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    assert invoke("simulate", *SMALL, "--json", "--requests-out", str(out)).exit_code == 0
    assert out.read_bytes().startswith(b"PAR1")


# -- reads never create ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["results", "list"],
        ["results", "best"],
        ["results", "export", "--out", "{tmp}/r.csv"],
        ["pareto", "plot", "--out", "{tmp}/p.png"],
    ],
)
def test_reading_a_database_that_does_not_exist_creates_nothing(
    command: list[str], tmp_path: Path
) -> None:
    db = tmp_path / "nothing.db"
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    message = failure(*args, "--db", f"sqlite:///{db}")
    assert "no results database at" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_export_and_plot_never_create_folders(tmp_path: Path) -> None:
    for command, name in (("results export", "r.csv"), ("pareto plot", "p.png")):
        out = tmp_path / "missing" / name
        message = failure(*command.split(), "--out", str(out), "--db", str(tmp_path / "x.db"))
        assert "does not exist" in message
    assert not (tmp_path / "missing").exists()


def test_open_database_without_create(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with pytest.raises(DatabaseError, match="no results database at"):
        open_database(f"sqlite:///{path}", create=False)
    assert not path.exists()
    open_database(f"sqlite:///{path}").close()  # created
    with open_database(f"sqlite:///{path}", create=False) as db:
        assert json.loads(json.dumps(db.url))  # opens what exists
