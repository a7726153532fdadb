"""deploy/ stays in step with the code: every llmcap command it runs exists with those
options, the planning spec it ships validates, and image, manifests and packaging agree."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import click
import pytest
import yaml

from search._plan import check_plan, load_plan
from search.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted((DEPLOY / "kuberay").glob("*.yaml"))
UNITS = sorted((DEPLOY / "systemd").glob("llmcap-*"))

# A command: optional `exec` and VAR=value words, optional directory, `llmcap`, its words.
# Lines are cut into commands at && ; || and `sh -c '`; words end at a redirect.
_COMMAND = re.compile(r"^(?:exec\s+)?(?:[A-Z_]+=\S+\s+)*(?:\S*/)?llmcap\s+(.*)$")
_SEPARATORS = re.compile(r"&&|;|\|\||-c '")
_SUBSTITUTION = re.compile(r"\$\([^)]*\)")  # $(date +%F): part of one word
_END_OF_WORDS = re.compile(r"\s(?:\d?>>?|\|)\s.*$|'$")


def _command_candidates(path: Path) -> list[tuple[int, str]]:
    """Lines that hold commands: a Markdown file's fenced code, any other file's lines."""
    lines = path.read_text().splitlines()
    if path.suffix != ".md":
        return list(enumerate(lines, 1))
    fenced, inside = [], False
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            inside = not inside
        elif inside:
            fenced.append((number, line))
    return fenced


def _documents() -> list[dict]:
    return [doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text()) if doc]


def _command_lines() -> list[tuple[str, list[str]]]:
    """Every llmcap invocation written in deploy/: (where, argv after `llmcap`)."""
    found = []
    for path in sorted(DEPLOY.rglob("*")):
        if not path.is_file() or path.suffix == ".dockerignore":
            continue
        for number, line in _command_candidates(path):
            line = re.sub(r"^Exec\w*=", "", line.lstrip("#").strip())
            for part in _SEPARATORS.split(line):
                match = _COMMAND.match(part.strip())
                if match:
                    text = _SUBSTITUTION.sub("X", _END_OF_WORDS.sub("", match.group(1)))
                    words = shlex.split(text, comments=True)
                    found.append((f"{path.relative_to(ROOT)}:{number}", words))
    for doc in _documents():
        for container in _containers(doc):
            command = container.get("command") or []
            if command[:1] == ["llmcap"]:
                found.append((f"{doc['kind']} {doc['metadata']['name']}", command[1:]))
    return found


def _containers(doc: dict) -> list[dict]:
    out = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            out.extend(c for c in node.get("containers", []) if isinstance(c, dict))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return out


def _resolve(argv: list[str]) -> tuple[click.Command, list[str]]:
    command: click.Command = cli
    rest = list(argv)
    while isinstance(command, click.Group):  # get_command: lazily loaded groups too
        found = command.get_command(click.Context(command), rest[0]) if rest else None
        assert found is not None, f"no command {rest[:1]} in {command.name}"
        rest.pop(0)
        command = found
    return command, rest


def test_deploy_runs_llmcap_commands() -> None:
    kinds = {" ".join(argv[:2]) for _, argv in _command_lines()}
    assert {"search submit", "results best", "plan run", "plan history", "plan diff"} <= kinds


@pytest.mark.parametrize(("where", "argv"), _command_lines(), ids=lambda x: str(x)[:60])
def test_every_llmcap_command_in_deploy_exists_with_its_options(where, argv) -> None:
    command, rest = _resolve(argv)
    options = {opt for param in command.params for opt in param.opts + param.secondary_opts}
    flags = {opt for param in command.params if getattr(param, "is_flag", False)
             for opt in param.opts}  # fmt: skip
    positional = []
    tokens = iter(rest)
    for token in tokens:
        if token.startswith("-"):
            name = token.split("=", 1)[0]
            assert name in options, f"{where}: {' '.join(argv)}: no option {name}"
            if "=" not in token and name not in flags:
                next(tokens, None)  # the option's value
        else:
            positional.append(token)
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    required = [p for p in arguments if p.required]
    assert len(required) <= len(positional) <= len(arguments), f"{where}: {argv}"


def test_manifests_are_kubernetes_objects() -> None:
    docs = _documents()
    assert {doc["kind"] for doc in docs} >= {"RayCluster", "CronJob", "ConfigMap"}
    for doc in docs:
        assert doc["apiVersion"] and doc["metadata"]["name"], doc


def test_the_cron_job_runs_the_shipped_example_plan_and_fails_on_exit_3() -> None:
    (config_map,) = [d for d in _documents() if d["kind"] == "ConfigMap"]
    example = ROOT / "examples" / "capacity_plan.yaml"
    assert config_map["data"]["plan.yaml"] == example.read_text()
    check_plan(load_plan(example))
    (cron_job,) = [d for d in _documents() if d["kind"] == "CronJob"]
    job = cron_job["spec"]["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][:3] == ["llmcap", "plan", "run"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert f"{mounts['plans']}/plan.yaml" in container["command"]
    out = container["command"][container["command"].index("--out") + 1]
    assert out == mounts["reports"]  # the reports are kept on the volume
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["plans"]["configMap"]["name"] == config_map["metadata"]["name"]
    (claim,) = [d for d in _documents() if d["kind"] == "PersistentVolumeClaim"]
    assert volumes["reports"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    # exit 3 fails the Job at once: a retry would compare with this run and find nothing new
    assert pod["restartPolicy"] == "Never"
    (rule,) = job["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob" and 3 in rule["onExitCodes"]["values"]
    assert rule["onExitCodes"]["containerName"] == container["name"]


def test_systemd_and_cron_run_the_plan() -> None:
    service = _unit(DEPLOY / "systemd" / "llmcap-plan.service")["Service"]
    (start,) = service["ExecStart"]
    assert start.split()[1:4] == ["plan", "run", "/etc/llmcap/plan.yaml"]
    assert "SuccessExitStatus" not in service  # exit 3 leaves the unit failed
    readme = (DEPLOY / "README.md").read_text()
    (cron,) = [line for line in readme.splitlines() if line.startswith("0 2 * * *")]
    assert "llmcap plan run /etc/llmcap/plan.yaml" in cron and "|| tail" in cron


def _dockerfile_ray_version() -> str:
    match = re.search(r"^ARG RAY_VERSION=(\S+)$", (DEPLOY / "Dockerfile").read_text(), re.M)
    assert match, "deploy/Dockerfile pins Ray with ARG RAY_VERSION"
    return match.group(1)


def test_the_image_and_the_manifests_run_one_ray_version_the_project_accepts() -> None:
    version = _dockerfile_ray_version()
    for doc in _documents():
        if doc["kind"] == "RayCluster":
            assert doc["spec"]["rayVersion"] == version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (ray,) = [d for d in project["dependencies"] if d.startswith("ray")]
    minimum = re.search(r">=\s*([\d.]+)", ray).group(1)
    as_tuple = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
    assert as_tuple(version) >= as_tuple(minimum)


def test_the_image_copies_every_package_the_project_installs() -> None:
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {pattern.rstrip("*") for pattern in setup["packages"]["find"]["include"]}
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    for package in packages:
        assert f"COPY {package} {package}" in dockerfile
        assert f"!{package}" in ignore


def _unit(path: Path) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        else:
            key, value = line.split("=", 1)
            current.setdefault(key, []).append(value)
    return sections


def test_systemd_units_are_complete_and_the_timer_starts_the_planning_service() -> None:
    names = {path.name for path in UNITS}
    assert {"llmcap-plan.timer", "llmcap-plan.service", "llmcap-ray-head.service"} <= names
    for path in UNITS:
        unit = _unit(path)
        assert "Description" in unit["Unit"]
        kind = path.suffix.lstrip(".").capitalize()
        assert kind in unit, f"{path.name} has no [{kind}] section"
        for command in unit.get("Service", {}).get("ExecStart", []):
            assert command.startswith("/"), f"{path.name}: ExecStart needs an absolute path"
    timer = _unit(DEPLOY / "systemd" / "llmcap-plan.timer")["Timer"]
    assert timer.get("Unit", ["llmcap-plan.service"]) == ["llmcap-plan.service"]
    assert timer["OnCalendar"]
