"""benchmarks/quickstart_commits.py: the base commit is exported without touching the repository."""

from __future__ import annotations

import subprocess

import pytest

from benchmarks.harness import ROOT

from benchmarks import quickstart_commits


def test_a_commit_is_exported_as_files_and_the_repository_is_left_as_it_was(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("the benchmark exports commits of a git checkout; this tree is an export without history")
    before = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    tree = quickstart_commits.export("HEAD", tmp_path)
    assert (tree / "src" / "teamrl" / "cli.py").is_file() and (tree / "pyproject.toml").is_file()
    assert not (tree / ".git").exists() and list(tmp_path.iterdir()) == [tree]  # the archive is removed
    after = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert before == after
