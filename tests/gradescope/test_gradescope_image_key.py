"""The simulated Gradescope image's cache key (autograder/gradescope/sim/image.py): what setup.sh is
given decides it, the deployment's own entries do not, and each run gets the current zip's."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path

import pytest

from autograder.gradescope.sim.image import Image, fresh_autograder_dir, image_key
from autograder.hidden_secret import SECRET_FILE


def make_zip(
    path: Path, *, secret: str = "s1", fingerprint: str = "f1", wheel: bytes = b"w", extra: dict | None = None
) -> Path:
    entries = {
        "setup.sh": (b"#!/bin/bash\n", 0o755),
        "run_autograder": (b"#!/bin/bash\n", 0o755),
        "constraints.txt": (b"numpy==2\n", 0o644),
        "autograder-1-py3-none-any.whl": (wheel, 0o644),
        "gradescope.json": (
            json.dumps({"wheel": "autograder-1-py3-none-any.whl", "hidden_secret": fingerprint}).encode(),
            0o644,
        ),
        SECRET_FILE: (secret.encode(), 0o600),
        **{name: (data, 0o644) for name, data in (extra or {}).items()},
    }
    with zipfile.ZipFile(path, "w") as zf:
        for name, (data, mode) in sorted(entries.items()):
            info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


@pytest.mark.parametrize(
    "change, same",
    [
        ({"secret": "s2", "fingerprint": "f2"}, True),  # another checkout's secret: the same image
        ({"wheel": b"w2"}, False),  # another grader
        ({"extra": {"x.txt": b"x"}}, False),  # another file in the zip
    ],
)
def test_the_key_is_what_setup_sh_is_given(tmp_path, change, same):
    one = image_key(make_zip(tmp_path / "a.zip"), "host")
    other = make_zip(tmp_path / "b.zip", **change)
    assert (image_key(other, "host") == one) is same
    assert image_key(other, "debian") != image_key(other, "host")


def test_each_run_gets_the_current_zips_secret_and_manifest_as_setup_sh_leaves_them(tmp_path):
    built_from, current = make_zip(tmp_path / "a.zip"), make_zip(tmp_path / "b.zip", secret="s2", fingerprint="f2")
    folder = tmp_path / "image"
    source = folder / "autograder-source"
    source.mkdir(parents=True)
    for name, data in ((SECRET_FILE, b"s1"), ("gradescope.json", b"{}"), ("setup.sh", b"")):
        (source / name).write_bytes(data)
        os.chmod(source / name, 0o600)
    (folder / "run_autograder").write_text("#!/bin/bash\n")
    assert image_key(built_from, "host") == image_key(current, "host")
    run = tmp_path / "run"
    run.mkdir()
    root = fresh_autograder_dir(Image("k", folder, "host", current), run)
    assert (root / "source" / SECRET_FILE).read_bytes() == b"s2"
    assert json.loads((root / "source" / "gradescope.json").read_text())["hidden_secret"] == "f2"
    for name in (SECRET_FILE, "gradescope.json"):
        assert stat.S_IMODE((root / "source" / name).stat().st_mode) == 0o600
