"""The per-slot budget's parts, one at a time: cgroup set-up and teardown (a real cgroup where this
machine offers one; cgroup v2 files in a small fake tree), the rlimits a cgroup replaces, the
command prefix that joins it, and the jail's sitecustomize that bounds ONNX Runtime's pools."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from sandbox_helpers import FAST

from autograder.jail import cgroups, jail, jail_site


def _fake_v2(tmp_path: Path) -> cgroups.Hierarchy:
    parent = tmp_path / "grader"
    parent.mkdir()
    (parent / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (parent / "cgroup.subtree_control").write_text("memory pids cpu\n")
    return cgroups.Hierarchy(2, {c: parent for c in cgroups.CONTROLLERS})


def test_v2_limits_are_written_to_one_folder(tmp_path):
    hierarchy = _fake_v2(tmp_path)
    folder = hierarchy.parents["memory"] / cgroups.slot_name(3)
    folder.mkdir()
    for name in ("memory.max", "memory.swap.max", "pids.max", "cpu.weight"):
        (folder / name).write_text("")
    cg = cgroups.create(hierarchy, 3, 512 << 20)
    assert cg.folders == [folder] and cg.layers() == ["cgroup_memory", "cgroup_pids", "cgroup_cpu"]
    assert (folder / "memory.max").read_text() == str(512 << 20)
    assert (folder / "memory.swap.max").read_text() == "0"
    assert (folder / "pids.max").read_text() == str(cgroups.PIDS_MAX)
    assert (folder / "cpu.weight").read_text() == str(cgroups.CPU_WEIGHT_V2)
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    assert cg.oom_kills() == 2


def test_v2_without_delegated_controllers_is_refused_with_a_reason(tmp_path):
    parent = tmp_path / "grader"
    parent.mkdir()
    (parent / "cgroup.controllers").write_text("cpu io\n")
    (parent / "cgroup.subtree_control").write_text("")
    why = cgroups._v2_delegate(parent)
    assert why and "lacks controllers" in why and "memory" in why


def test_stale_cgroups_of_dead_graders_are_swept_and_live_ones_kept(tmp_path):
    hierarchy = _fake_v2(tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    parent = hierarchy.parents["memory"]
    stale, mine, live = (
        parent / cgroups.slot_name(1, dead.pid),
        parent / cgroups.slot_name(1),
        parent / cgroups.slot_name(1, 1),
    )
    for d in (stale, mine, live):
        d.mkdir()
    other = parent / "someone-else"
    other.mkdir()
    assert cgroups.sweep_stale(hierarchy) == [stale]
    assert mine.exists() and live.exists() and other.exists() and not stale.exists()


def test_the_join_prefix_moves_the_command_into_every_folder_then_execs_it(tmp_path):
    procs = [tmp_path / "a.procs", tmp_path / "b.procs"]
    cg = cgroups.SlotCgroup(1, {"memory": tmp_path / "a", "pids": tmp_path / "b"})
    for d in cg.folders:
        d.mkdir()
    argv = cgroups.join_prefix(cg) + [sys.executable, "-c", "print('ran')"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "ran", out
    for d in cg.folders:  # "0" means "the writing process" to a real cgroup.procs
        assert (d / "cgroup.procs").read_text().strip() == "0"
    assert not any(p.exists() for p in procs)


def test_a_cgroup_replaces_rlimit_as_and_nproc():
    cg = cgroups.SlotCgroup(1, {"memory": Path("/m"), "pids": Path("/p"), "cpu": Path("/c")})
    plain = jail.rlimits(FAST, with_nproc=True)
    budget = jail.rlimits(FAST, with_nproc=True, cgroup=cg)
    assert plain["AS"] == FAST.memory_mb << 20 and plain["NPROC"] == jail.NPROC_LIMIT
    assert "AS" not in budget and "NPROC" not in budget and budget["FSIZE"] == plain["FSIZE"]
    # one process may still not map more than the whole budget: an oversized allocation is a MemoryError
    assert budget["DATA"] == FAST.memory_mb << 20 and "DATA" not in plain


@pytest.mark.skipif(cgroups.available()[0] is None, reason="no writable cgroup hierarchy here")
def test_a_real_slot_cgroup_is_made_limited_and_removed():
    with cgroups.slot_cgroup(97, 300 << 20) as (cg, why):
        assert cg is not None, why
        assert cg.memory_limit() == 300 << 20
        argv = cgroups.join_prefix(cg) + ["/bin/sh", "-c", "cat /proc/self/cgroup"]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
        joined = [line for line in out.splitlines() if cgroups.slot_name(97) in line]
        for name in ("memory", "pids", "cpu"):
            assert any(name in line.split(":")[1].split(",") or line.startswith("0::") for line in joined), out
        folders = cg.folders
    assert not any(f.exists() for f in folders), "the cgroup outlived its run"


def test_cgroups_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_CGROUPS", "off")
    with cgroups.slot_cgroup(96, 1 << 30) as (cg, why):
        assert cg is None and "AUTOGRADER_CGROUPS=off" in why


def test_the_sites_patch_gives_default_sessions_a_bounded_pool():
    class Options:
        def __init__(self):
            self.intra_op_num_threads = 0
            self.inter_op_num_threads = 0

    class Session:
        def __init__(self, model, sess_options=None, providers=None):
            self.options = sess_options

    module = types.SimpleNamespace(InferenceSession=Session, SessionOptions=Options)
    jail_site.patch_onnxruntime(module, 3)
    jail_site.patch_onnxruntime(module, 5)  # idempotent
    default = Session(b"m")
    assert (default.options.intra_op_num_threads, default.options.inter_op_num_threads) == (3, 3)
    explicit = Options()
    explicit.intra_op_num_threads = 8
    assert Session(b"m", sess_options=explicit).options.intra_op_num_threads == 8
    assert Session(b"m", Options(), providers=["CPU"]).options.intra_op_num_threads == 3


def test_the_site_runs_in_a_fresh_interpreter_and_patches_onnxruntime(tmp_path):
    site = jail.write_site(tmp_path / "site")
    code = "import onnxruntime as ort\nprint(ort.InferenceSession._autograder_threads)"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), jail_site.THREADS_VARIABLE: "2"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr[-2000:]
    assert 1 <= jail_site.kernel_threads() <= jail_site.MAX_KERNEL_THREADS
    assert os.access(site / "sitecustomize.py", os.R_OK)
