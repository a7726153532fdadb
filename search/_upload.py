"""What `llmcap search submit` uploads as a job's working directory, and nothing else.

The spec's folder is walked with `.gitignore`-style rules: the patterns of every `.gitignore`
and `.rayignore` in it (each applies below its own folder, as git does) and those given with
`--exclude`; dotfiles and dot-folders (`.env`, `.git`, `.venv`) are skipped unless asked for.
Files the spec names by a relative path (a trace, a catalog, a model config) are uploaded even
when a rule excludes them: the job cannot run without them.  The chosen files are copied into a
fresh folder and that folder is what Ray zips and uploads, so the list printed is exactly what
reaches the cluster.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

IGNORE_FILES = (".gitignore", ".rayignore")
DEFAULT_MAX_BYTES = 100 * 1024 * 1024  # Ray's own limit is the gRPC message size (512 MiB)
MAX_FILES = 5000


class UploadError(ValueError):
    """The spec's folder cannot be uploaded as it is; the message says why and what to do."""


@dataclass(slots=True)
class _Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    base: str  # the folder (relative, "" for the top) whose ignore file holds the rule

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        if self.base:
            if not rel.startswith(self.base + "/"):
                return False
            rel = rel[len(self.base) + 1 :]
        return self.regex.fullmatch(rel) is not None


def _glob_to_regex(glob: str) -> str:
    """gitignore wildcards: `*` and `?` stay inside one path segment, `**` crosses them."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = glob.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = glob[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                i = end + 1
        elif c == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def parse_rules(lines: list[str], base: str = "") -> list[_Rule]:
    """The rules of one ignore file (or of `--exclude` patterns when `base` is "")."""
    rules = []
    for raw in lines:
        line = raw.rstrip("\n")
        if not line.endswith("\\ "):
            line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate or line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line  # a slash at the start or in the middle anchors it to `base`
        line = line.lstrip("/")
        regex = _glob_to_regex(line)
        if not anchored:
            regex = "(?:.*/)?" + regex
        rules.append(_Rule(re.compile(regex, re.S), negate, dir_only, base))
    return rules


def is_excluded(rel: str, is_dir: bool, rules: list[_Rule]) -> bool:
    """Whether the last rule that matches `rel` (a path relative to the top) excludes it."""
    excluded = False
    for rule in rules:
        if rule.matches(rel, is_dir):
            excluded = not rule.negate
    return excluded


@dataclass(slots=True)
class UploadPlan:
    """The files to upload (relative paths and sizes) and what was left out, and why."""

    root: Path
    files: list[tuple[str, int]] = field(default_factory=list)
    forced: list[str] = field(default_factory=list)  # excluded by a rule, named by the spec
    dotfiles: list[str] = field(default_factory=list)  # skipped dotfiles and dot-folders
    excluded: list[str] = field(default_factory=list)  # skipped by a rule
    missing: list[str] = field(default_factory=list)  # named by the spec, not in the folder
    total_bytes: int = 0

    def add(self, rel: str, size: int) -> None:
        self.files.append((rel, size))
        self.total_bytes += size


def _refuse_folder(root: Path) -> None:
    home = Path.home().resolve()
    if root == Path(root.anchor):
        raise UploadError(
            f"refusing to upload {root}: it is the filesystem root. Put the spec and the files "
            "it needs in a folder of their own."
        )
    if root == home:
        raise UploadError(
            f"refusing to upload {root}: it is your home folder, and submit uploads the spec's "
            "whole folder. Put the spec and the files it needs in a folder of their own."
        )


def spec_named_files(spec_file: Path) -> list[str]:
    """Relative paths the spec names (workload source, catalog files, a model config)."""
    try:
        data = yaml.safe_load(spec_file.read_text())
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(data, dict):
        return []
    workload = data.get("workload")
    names = [workload.get("source") if isinstance(workload, dict) else workload]
    catalog = data.get("catalog")
    names += catalog if isinstance(catalog, list) else [catalog]
    names.append(data.get("model"))
    return [n for n in names if isinstance(n, str) and n and not Path(n).is_absolute()]


def plan_upload(
    spec_file: Path,
    excludes: tuple[str, ...] | list[str] = (),
    *,
    include_dotfiles: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_files: int = MAX_FILES,
) -> UploadPlan:
    """Choose the files of the spec's folder to upload; refuse a folder that is too large,
    the home folder or the filesystem root."""
    root = spec_file.resolve().parent
    _refuse_folder(root)
    plan = UploadPlan(root)
    named: dict[str, bool] = {}  # relative path -> met in the walk
    for name in [spec_file.name, *spec_named_files(spec_file)]:
        candidate = (root / name).resolve()
        if not candidate.is_file():
            continue  # a built-in name (a workload such as "chat", a model id), or missing
        if candidate.is_relative_to(root):
            named[candidate.relative_to(root).as_posix()] = False
        else:
            plan.missing.append(name)
    rules = parse_rules(list(excludes))
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        base = here.relative_to(root).as_posix()
        base = "" if base == "." else base
        for ignore_file in IGNORE_FILES:
            path = here / ignore_file
            if path.is_file():
                rules = rules + parse_rules(path.read_text(errors="replace").splitlines(), base)
        kept = []
        for name in sorted(dirnames):
            rel = f"{base}/{name}" if base else name
            if (name.startswith(".") and not include_dotfiles) or name == ".git":
                plan.dotfiles.append(rel + "/")
            elif is_excluded(rel, True, rules):
                plan.excluded.append(rel + "/")
            elif (here / name).is_symlink():
                plan.excluded.append(rel + "/ (a link to a folder)")
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            rel = f"{base}/{name}" if base else name
            path = here / name
            if rel in named:
                named[rel] = True
                if name.startswith(".") or is_excluded(rel, False, rules):
                    plan.forced.append(rel)
            elif name.startswith(".") and not include_dotfiles:
                plan.dotfiles.append(rel)
                continue
            elif name in IGNORE_FILES or is_excluded(rel, False, rules):
                plan.excluded.append(rel)
                continue
            if not path.is_file():
                continue  # a broken link, a socket
            plan.add(rel, path.stat().st_size)
            _check_size(plan, max_bytes, max_files)
    for rel, found in named.items():
        if not found:  # inside a skipped folder: the job needs it all the same
            plan.add(rel, (root / rel).stat().st_size)
            plan.forced.append(rel)
            _check_size(plan, max_bytes, max_files)
    plan.files.sort()
    return plan


def _check_size(plan: UploadPlan, max_bytes: int, max_files: int) -> None:
    if plan.total_bytes > max_bytes or len(plan.files) > max_files:
        raise UploadError(
            f"refusing to upload {plan.root}: more than {_size(max_bytes)} or {max_files} files "
            f"to upload (at {plan.files[-1][0]}). Leave out what the job does not need with "
            "--exclude PATTERN or a .gitignore, put large traces on a volume the head mounts "
            "and name them by absolute path, or raise --max-upload-mb."
        )


def stage(plan: UploadPlan, into: Path) -> None:
    """Copy the planned files into `into` (an empty folder), keeping their relative paths."""
    for rel, _ in plan.files:
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(plan.root / rel, target)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def describe(plan: UploadPlan, limit: int = 40) -> list[str]:
    """Lines that tell the user what is uploaded and what is not."""
    lines = [
        f"uploading {len(plan.files)} file(s), {_size(plan.total_bytes)}, from {plan.root} "
        "as the job's working directory:"
    ]
    for rel, size in plan.files[:limit]:
        note = "  (named by the spec; uploaded although excluded)" if rel in plan.forced else ""
        lines.append(f"  {rel}  {_size(size)}{note}")
    if len(plan.files) > limit:
        lines.append(f"  ... and {len(plan.files) - limit} more")
    if plan.dotfiles:
        lines.append(
            f"not uploaded, dotfiles (--include-dotfiles to upload them): {_some(plan.dotfiles)}"
        )
    if plan.excluded:
        lines.append(f"not uploaded, excluded: {_some(plan.excluded)}")
    for name in plan.missing:
        lines.append(
            f"warning: the spec names {name}, which is outside {plan.root}: it is not uploaded; "
            "on the cluster, name it by an absolute path the head can read"
        )
    return lines


def _some(names: list[str], limit: int = 10) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
