"""`llmcap search submit` without a cluster: the database URL it sends, the password the
driver finds on the head, and the files it uploads (the pure parts; the Ray end-to-end check
is in test_submit_secrets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from search._db import DatabaseError
from search._db.connect import ENV_VAR, PASSWORD_ENV_VAR, mask_url, parse_url, without_password
from search._upload import UploadError, is_excluded, parse_rules, plan_upload
from tests.search.conftest import TINY_SPEC
from tests.search.test_jobs_cli import llmcap

SECRET = "Pw-7f3c9e1d-never-shown"


@pytest.mark.parametrize(
    ("url", "sent"),
    [
        (f"postgresql://llmcap:{SECRET}@db:5432/llmcap", "postgresql://llmcap@db:5432/llmcap"),
        (f"postgresql+psycopg://u:{SECRET}@db/x?sslmode=require",
         "postgresql+psycopg://u@db/x?sslmode=require"),
        (f"postgresql://db/x?password={SECRET}&sslmode=require",
         "postgresql://db/x?sslmode=require"),
        ("postgresql://u:S%40cret@db/x", "postgresql://u@db/x"),
        ("postgresql://u:@db/x", "postgresql://u@db/x"),
    ],
)  # fmt: skip
def test_the_url_sent_to_the_cluster_has_no_password(url: str, sent: str) -> None:
    assert without_password(url) == (sent, True)
    assert SECRET not in mask_url(url)


@pytest.mark.parametrize("url", ["sqlite:///results.db", "results.db", "postgresql://u@db/x"])
def test_a_url_without_password_is_sent_as_it_is(url: str) -> None:
    assert without_password(url) == (url, False)


def test_an_unescaped_at_in_the_password_is_refused_without_showing_it() -> None:
    with pytest.raises(DatabaseError, match="%40") as error:
        without_password("postgresql://u:se@cret@db/x")
    assert "se@cret" not in str(error.value) and "cret" not in mask_url("postgresql://u:se@cret@db/x")


def test_the_driver_takes_the_password_from_the_variable_named(monkeypatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv(PASSWORD_ENV_VAR, "DB_SECRET")
    monkeypatch.setenv("DB_SECRET", SECRET)
    assert parse_url("postgresql://u@db/x").password == SECRET
    monkeypatch.delenv("DB_SECRET")
    with pytest.raises(DatabaseError, match="DB_SECRET is not set") as error:
        parse_url("postgresql://u@db/x")
    assert SECRET not in str(error.value)


def test_the_driver_takes_the_password_from_llmcap_db_for_the_same_database(monkeypatch) -> None:
    monkeypatch.delenv(PASSWORD_ENV_VAR, raising=False)
    monkeypatch.setenv(ENV_VAR, f"postgresql://llmcap:{SECRET}@DB:5432/llmcap")
    assert parse_url("postgresql://llmcap@db/llmcap").password == SECRET
    assert parse_url("postgresql://other@db/llmcap").password is None  # another user
    assert parse_url("postgresql://llmcap@db/other").password is None  # another database
    assert parse_url("postgresql://llmcap@db:6543/llmcap").password is None  # another server
    assert parse_url("postgresql://llmcap:given@db/llmcap").password == "given"


# -- what is uploaded ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "path", "is_dir", "excluded"),
    [
        (["*.csv"], "a.csv", False, True),
        (["*.csv"], "deep/er/a.csv", False, True),
        (["/*.csv"], "deep/a.csv", False, False),
        (["data/*.csv"], "data/a.csv", False, True),
        (["data/*.csv"], "x/data/a.csv", False, False),  # a middle slash anchors
        (["cache/"], "cache", True, True),
        (["cache/"], "cache", False, False),  # a trailing slash: folders only
        (["**/tmp"], "a/b/tmp", True, True),
        (["out/**"], "out/a/b.txt", False, True),
        (["a/**/b"], "a/b", False, True),
        (["a/**/b"], "a/x/y/b", False, True),
        (["*.bin", "!keep.bin"], "keep.bin", False, False),  # the last match decides
        (["*.bin", "!keep.bin"], "drop.bin", False, True),
        (["file?.txt"], "file1.txt", False, True),
        (["file?.txt"], "file/.txt", False, False),
        (["[ab].txt"], "b.txt", False, True),
        (["[!ab].txt"], "b.txt", False, False),
        (["# a comment", ""], "# a comment", False, False),
        (["\\#name"], "#name", False, True),
    ],
)  # fmt: skip
def test_gitignore_style_patterns(patterns, path, is_dir, excluded) -> None:
    assert is_excluded(path, is_dir, parse_rules(patterns)) is excluded


def test_rules_of_a_nested_ignore_file_apply_below_its_folder() -> None:
    rules = parse_rules(["*.log", "/top.txt"], base="sub")
    assert is_excluded("sub/a.log", False, rules)
    assert is_excluded("sub/top.txt", False, rules)
    assert not is_excluded("a.log", False, rules)
    assert not is_excluded("sub/x/top.txt", False, rules)


def _folder(tmp_path: Path, source: str = "chat") -> Path:
    spec = {**TINY_SPEC, "workload": {"source": source, "num_requests": 150}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / ".env").write_text(f"PGPASSWORD={SECRET}\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "x").write_text("x")
    (tmp_path / ".gitignore").write_text("*.parquet\nscratch/\n")
    (tmp_path / "out.parquet").write_text("p")
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "notes.md").write_text("n")
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "big.parquet").write_text("t")
    (tmp_path / "traces" / "small.csv").write_text("t")
    (tmp_path / "README.md").write_text("r")
    return tmp_path / "spec.yaml"


def test_the_upload_skips_dotfiles_and_ignored_files(tmp_path: Path) -> None:
    plan = plan_upload(_folder(tmp_path))
    assert [rel for rel, _ in plan.files] == ["README.md", "spec.yaml", "traces/small.csv"]
    assert set(plan.dotfiles) >= {".env", ".git/", ".cache/"}
    assert {"out.parquet", "scratch/", "traces/big.parquet"} <= set(plan.excluded)
    with_dots = plan_upload(tmp_path / "spec.yaml", ["*.md"], include_dotfiles=True)
    assert [rel for rel, _ in with_dots.files] == [
        ".cache/x", ".env", "spec.yaml", "traces/small.csv"  # never .git, nor .gitignore
    ]  # fmt: skip


def test_files_the_spec_names_are_uploaded_even_when_excluded(tmp_path: Path) -> None:
    plan = plan_upload(_folder(tmp_path, source="traces/big.parquet"), ["traces/"])
    assert [rel for rel, _ in plan.files] == ["README.md", "spec.yaml", "traces/big.parquet"]
    assert plan.forced == ["traces/big.parquet"]


def test_too_large_a_folder_home_and_root_are_refused(tmp_path: Path, monkeypatch) -> None:
    spec = _folder(tmp_path)
    with pytest.raises(UploadError, match="--max-upload-mb"):
        plan_upload(spec, max_bytes=2)
    with pytest.raises(UploadError, match="more than"):
        plan_upload(spec, max_files=1)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(UploadError, match="home folder"):
        plan_upload(spec)
    with pytest.raises(UploadError, match="filesystem root"):
        plan_upload(Path("/spec.yaml"))


def test_submit_dry_run_shows_the_upload_and_sends_no_password(tmp_path: Path) -> None:
    spec = _folder(tmp_path)
    shown = llmcap(
        "search", "submit", str(spec), "--address", "http://127.0.0.1:9",
        "--db", f"postgresql://llmcap:{SECRET}@db:5432/llmcap", "--dry-run",
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert SECRET not in shown.stdout + shown.stderr
    assert "uploading 3 file(s)" in shown.stderr and "traces/small.csv" in shown.stderr
    assert "the password in --db was removed" in shown.stderr
    assert "--db postgresql://llmcap@db:5432/llmcap" in shown.stderr  # the entrypoint
    bad = llmcap("search", "submit", str(spec), "--address=http://x:1", "--db-password-env=A B")
    assert bad.returncode == 2 and "not an environment variable name" in bad.stderr
