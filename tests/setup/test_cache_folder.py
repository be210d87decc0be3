"""Publishing a cache folder: complete or absent, never half; a twin published meanwhile is kept."""

import pytest

from teamrl.setup.cache_folder import is_published, publish


def writer(text):
    def write(folder):
        (folder / "config.json").write_text("{}")
        (folder / "weights").write_text(text)
    return write


def leftovers(root, name):
    return sorted(p.name for p in root.iterdir() if p.name != name)


def test_publish_writes_aside_then_renames(tmp_path):
    target = tmp_path / "cache" / "tiny-default-abc"
    assert publish(target, writer("a")) == target
    assert is_published(target) and (target / "weights").read_text() == "a"
    assert leftovers(target.parent, target.name) == []
    assert oct(target.stat().st_mode & 0o777) == "0o755"


def test_a_twin_published_meanwhile_is_kept_and_ours_dropped(tmp_path):
    target = tmp_path / "tiny-default-abc"

    def racing(folder):  # another process finishes the same recipe while we write ours
        publish(target, writer("first"))
        writer("second")(folder)

    publish(target, racing)
    assert (target / "weights").read_text() == "first"
    assert leftovers(tmp_path, target.name) == []


def test_force_replaces_and_a_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "tiny-default-abc"
    publish(target, writer("old"))
    publish(target, writer("new"), force=True)
    assert (target / "weights").read_text() == "new"

    def broken(folder):
        (folder / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        publish(tmp_path / "other", broken)
    assert not (tmp_path / "other").exists()
    assert leftovers(tmp_path, target.name) == []


def test_a_half_folder_in_the_way_is_an_error_not_a_cache(tmp_path):
    target = tmp_path / "tiny-default-abc"
    target.mkdir()
    (target / "stray").write_text("not a model")
    with pytest.raises(OSError):
        publish(target, writer("a"))
    assert not is_published(target) and leftovers(tmp_path, target.name) == []
