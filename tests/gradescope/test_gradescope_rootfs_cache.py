"""The cached Debian tarball of `gradescope simulate --base debian` is replaced atomically: a tool
(here a stand-in for mmdebstrap, which picks its output format by the target's extension) writes a
temporary ``.tar`` beside it; a failed run leaves the cached one and no temporary file."""

from __future__ import annotations

import os

import pytest

from autograder.gradescope.sim import rootfs

FAKE = """#!/bin/sh
for a in "$@"; do case "$a" in *.tar) target="$a";; esac; done
printf 'half a tarball' > "$target"
[ "$FAKE_MMDEBSTRAP_FAIL" = 1 ] && { echo "E: mirror unreachable" >&2; exit 25; }
printf 'a fresh tarball' > "$target"
"""


@pytest.fixture
def fake_mmdebstrap(tmp_path, monkeypatch):
    tool = tmp_path / "bin" / "mmdebstrap"
    tool.parent.mkdir()
    tool.write_text(FAKE, encoding="utf-8")
    tool.chmod(0o755)
    monkeypatch.setattr(rootfs.shutil, "which", lambda name: str(tool) if name == "mmdebstrap" else None)
    monkeypatch.setattr(rootfs, "host_release", lambda: "testing")
    return tmp_path / "cache"


def test_a_made_tarball_replaces_the_cached_one(fake_mmdebstrap, monkeypatch):
    monkeypatch.delenv("FAKE_MMDEBSTRAP_FAIL", raising=False)
    tarball = rootfs.debian_tarball(fake_mmdebstrap)
    assert tarball.read_bytes() == b"a fresh tarball"
    assert sorted(os.listdir(fake_mmdebstrap)) == [tarball.name, f"{tarball.name}.lock"]


def test_a_failed_run_keeps_the_cached_tarball_and_leaves_no_temporary(fake_mmdebstrap, monkeypatch):
    fake_mmdebstrap.mkdir()
    tarball = fake_mmdebstrap / "debian-testing-minbase.tar"
    tarball.write_bytes(b"last week's tarball")
    monkeypatch.setenv("FAKE_MMDEBSTRAP_FAIL", "1")
    with pytest.raises(rootfs.RootfsError, match="exit 25.*mirror unreachable"):
        rootfs.debian_tarball(fake_mmdebstrap, refresh=True)
    assert tarball.read_bytes() == b"last week's tarball"
    assert sorted(os.listdir(fake_mmdebstrap)) == [tarball.name, f"{tarball.name}.lock"]
