"""setup.sh for real: run as root in a fresh Debian root file system (mmdebstrap, cached for a
week) inside the simulated Gradescope container, exactly as the Dockerfile runs it, except for
``--python /usr/bin/python3`` in place of uv's Python download (nothing but the package
registries can be reached here). Then: the system packages, the sandbox users, the modes (a
sandbox uid cannot read /autograder/source), the venv (readable by the sandbox uid, without the
grader's package), and the reference graded in that image at Gradescope's defaults.

About 2-3 minutes the first time on this machine (Debian's mirror and PyPI through the uv cache);
the image is cached by the zip's hash.
"""

from __future__ import annotations

import json
import os

import pytest

from container_testlib import EXAMPLES, FALLBACK_LAYERS, require_container

from autograder.gradescope.sim.container import ContainerSpec, run_container
from autograder.gradescope.sim.image import image_for, unpack_zip
from autograder.gradescope.sim.simulate import run_in_image
from needs import needs

pytestmark = pytest.mark.slow

CHECK = r"""
import grp, json, os, pwd, stat, subprocess
out = {}
out["users"] = {u.pw_name: [u.pw_uid, u.pw_dir, u.pw_shell] for u in pwd.getpwall() if u.pw_name.startswith("autograder-sb")}
out["packages"] = {p: subprocess.run(["dpkg", "-s", p], capture_output=True).returncode == 0
                   for p in ("bubblewrap", "util-linux", "python3-pip", "ca-certificates")}
modes = set()
for dirpath, dirnames, filenames in os.walk("/autograder/source"):
    for name in [dirpath] + [os.path.join(dirpath, f) for f in filenames]:
        st = os.lstat(name)
        modes.add((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode) & 0o077))
out["source_modes"] = sorted(modes)
out["venv_python"] = os.path.realpath("/opt/autograder/venv/bin/python")
as_sb = ["setpriv", "--reuid=autograder-sb0", "--regid=autograder-sb0", "--clear-groups", "--"]
def run(argv):
    p = subprocess.run(as_sb + argv, capture_output=True, text=True)
    return [p.returncode, p.stdout.strip()[-300:], p.stderr.strip()[-300:]]
out["sb_reads_source"] = run(["cat", "/autograder/source/gradescope.json"])
out["sb_lists_source"] = run(["ls", "/autograder/source"])
out["sb_runs_venv"] = run(["/opt/autograder/venv/bin/python", "-P", "-c", "import onnxruntime, numpy, ipykernel; print('ok')"])
out["sb_imports_grader"] = run(["/opt/autograder/venv/bin/python", "-P", "-c", "import autograder"])
out["grader"] = subprocess.run(["/opt/autograder/venv/bin/python", "-P", "-m", "autograder.cli", "--version"],
                               capture_output=True, text=True, env={"PYTHONPATH": "/opt/autograder/grader"}).stdout.strip()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
@needs("container")
def debian_image(gradescope_zip):
    require_container()
    import shutil

    if not shutil.which("mmdebstrap"):
        pytest.skip("mmdebstrap is missing (apt-get install mmdebstrap; `make setup` installs it)")
    with image_for(gradescope_zip, base="debian") as image:
        yield image


def test_setup_sh_in_a_fresh_debian_installs_users_modes_and_venv(debian_image):
    log = debian_image.setup_log
    assert "system packages: " in log and "already there" not in log, f"setup.sh installed nothing:\n{log[-2000:]}"
    assert "not downloaded" in log, "setup.sh --python must use the given interpreter"
    spec = ContainerSpec(
        memory_mb=None,
        cpus=None,
        rootfs=debian_image.rootfs,
        binds=[(str(debian_image.source), "/autograder/source", "rw")],
    )
    run = run_container(spec, ["/usr/bin/python3", "-I", "-c", CHECK], timeout_s=300)
    assert run.returncode == 0, run.log[-3000:]
    out = json.loads(run.log.strip().splitlines()[-1])
    assert sorted(out["users"]) == [f"autograder-sb{i}" for i in range(4)]
    assert all(
        61000 <= uid <= 61999 and home == "/nonexistent" and shell.endswith("nologin")
        for uid, home, shell in out["users"].values()
    ), out["users"]  # rootfs.separate_system_ids
    assert all(out["packages"].values()), out["packages"]
    assert out["source_modes"] == [[0, 0, 0]], f"/autograder/source: (uid, gid, group/other bits) {out['source_modes']}"
    assert out["venv_python"] == "/usr/bin/python3.11"
    assert out["sb_reads_source"][0] != 0 and "Permission denied" in out["sb_reads_source"][2], out["sb_reads_source"]
    assert out["sb_lists_source"][0] != 0, out["sb_lists_source"]
    assert out["sb_runs_venv"][:2] == [0, "ok"], out["sb_runs_venv"]
    assert out["sb_imports_grader"][0] != 0, "the grader's package must not be in the kernel's venv"
    assert out["grader"].startswith("autograder"), out


def test_the_reference_gets_full_marks_in_the_debian_image(debian_image, results_validator):
    sim = run_in_image(debian_image, EXAMPLES / "reference.ipynb", timeout_s=900)
    assert sim.results is not None, sim.stdout[-3000:]
    results_validator(sim.results)
    assert sim.results["score"] == 100, sim.summary()
    iso = sim.results["extra_data"]["isolation"]
    assert iso["mode"] == "fallback" and FALLBACK_LAYERS <= set(iso["layers"]), iso


@pytest.mark.container
def test_setup_sh_refuses_an_interpreter_of_another_version(gradescope_zip, tmp_path):
    require_container()
    source = tmp_path / "source"
    unpack_zip(gradescope_zip, source)
    fake = tmp_path / "python3.10"
    fake.write_text("#!/bin/sh\necho 3.10\n")
    os.chmod(fake, 0o755)
    os.chmod(tmp_path, 0o755)
    spec = ContainerSpec(
        memory_mb=None,
        cpus=None,
        binds=[(str(source), "/autograder/source", "rw"), (str(fake), "/opt/python3.10", "ro")],
    )
    run = run_container(
        spec, ["/bin/bash", "/autograder/source/setup.sh", "--python", "/opt/python3.10"], timeout_s=120
    )
    assert run.returncode == 1, run.log[-2000:]
    assert "is Python 3.10; the zip was built and pinned with 3.11" in run.log
    assert "uv 0.13" not in run.log, "the version must be checked before anything is downloaded"
