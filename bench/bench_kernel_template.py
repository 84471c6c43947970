"""What a warm kernel template (zygote) would save: a fresh jailed kernel against a fork of a template.

    .venv/bin/python bench/bench_kernel_template.py               # 5 rounds, as root
    .venv/bin/python bench/bench_kernel_template.py --rounds 9 --json /tmp/template.json

Both sides start a kernel through the grader's own ``JailedKernelManager`` and run lesson 07's
import-only cells (the reference solution's), one after the other, as the notebook would:

- ``fresh``: today's kernel command (``jail.kernel_command``: bwrap, setpriv, confine, then
  ``python -m ipykernel_launcher``): the interpreter starts and imports everything;
- ``template``: the launcher asks a template that imported the same modules once
  (``autograder/kernel_template/template.py``) to fork a child, which enters fresh namespaces, builds its
  root, drops to the slot uid, applies confine's layers and runs the kernel app in-process; the
  import cells find their modules already imported.

Per run: *wall* from ``start_kernel`` to the reply of the last import cell; *CPU* of every process
of the run until the kernel has exited after a shutdown request, counted by a cgroup of the
bench's own (``bench/cpu_accounting.py``; the fresh jail joins it before bwrap, the template's child
before it unshares), plus the launcher's own (template side; it stays outside). The template's own
start (once per slot) is reported apart, and so is the jail's entry alone (a child that runs
``pass``: fork, namespaces, root, uid, confine). Paired, interleaved rounds (the order
flips every round), medians. No slot cgroup limits either side. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, interleaved, paired_diffs, paired_ratios, spread  # noqa: E402
from bench.cpu_accounting import CpuGroup, children_seconds, join_prefix  # noqa: E402

ASSIGNMENT_ID = "07-quantization"
TICK = os.sysconf("SC_CLK_TCK")


def import_cells() -> list[str]:
    """Lesson 07's import-only cells (the reference solution's), in order."""
    from autograder.kernel_template.template import import_only_modules

    nb = json.loads((ROOT / "reference" / ASSIGNMENT_ID / "solution.ipynb").read_text())
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    return [s for s in sources if import_only_modules([s]) != import_only_modules([])]


def own_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def run_kernel(build, rundir: Path, workspace: Path, owner, cells: list[str]) -> float:
    """Start a kernel with ``build``, run ``cells``, shut it down; the wall time to the last cell's reply."""
    from autograder.sandbox.kernel import JailedKernelManager

    km = JailedKernelManager(command_builder=build, rundir=rundir, owner=owner)
    t0 = time.perf_counter()
    await km.start_kernel(cwd=str(workspace), env={"PATH": "/usr/bin:/bin"})
    kc = km.client()
    kc.start_channels()
    try:
        try:
            await kc.wait_for_ready(timeout=120)
        except RuntimeError as e:
            proc = km.provisioner.process if km.provisioner else None
            raise RuntimeError(f"{e} (kernel command exit {proc.poll() if proc else None})") from None
        for source in cells:
            reply = await kc.execute_interactive(source, timeout=120, output_hook=lambda msg: None)
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"an import cell failed: {reply['content'].get('ename')}")
        wall = time.perf_counter() - t0
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=False)  # a shutdown request: every process exits and is waited for
        await km.cleanup_resources()
    return wall


def jail_entry(tpl, user, limits) -> dict:
    """What entering the jail alone costs a child: fork, namespaces, root, uid, confine, then ``pass``
    (wall from the request to the template's last word; CPU from the template's ``wait4`` of it)."""
    from autograder.kernel_template import template, template_launcher
    from autograder.jail.users import reap_user
    from autograder.tree_walk import remove_tree

    base, rundir, site, workspace = fresh_folders(user)
    try:
        request = template.child_request(tpl, user, limits, workspace, rundir, site, code="pass")
        with open(os.devnull, "wb") as null:
            t0 = time.perf_counter()
            conn, reader, _ = template_launcher.spawn(tpl.socket_path, request, (null.fileno(), null.fileno()))
            end = template_launcher.wait_exit(reader)
            wall = time.perf_counter() - t0
        conn.close()
        return {"wall_s": wall, "cpu_s": end["utime"] + end["stime"]}
    finally:
        reap_user(user)
        remove_tree(workspace, ignore_errors=True)
        remove_tree(base, ignore_errors=True)


def rss_mb(pid: int) -> float:
    """The template's resident memory (``VmRSS``): what a slot keeps while it waits."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def fresh_folders(user):
    from autograder.jail import jail
    from autograder.sandbox.runfolder import make_run_folder, make_workspace_folder
    from autograder.jail.users import chown_tree_top

    base = make_run_folder()
    rundir, site = base / "run", jail.write_site(base / "site")
    rundir.mkdir(mode=0o700)
    workspace = make_workspace_folder()
    for d in (rundir, workspace):
        chown_tree_top(d, user)
    return base, rundir, site, workspace


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slot", type=int, default=7, help="sandbox slot (uid autograder-sb<N>) to use")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_kernel_template needs root (the jail's sandbox uid, mounts, namespaces)", file=sys.stderr)
        return 2

    from autograder.limits import ExecutionLimits
    from autograder.jail import jail
    from autograder.kernel_template import template
    from autograder.jail.users import claim_slot, ensure_user, reap_user
    from autograder.tree_walk import remove_tree

    cells = import_cells()
    modules = template.import_only_modules(cells)
    limits = ExecutionLimits()
    with claim_slot(args.slot) as slot:
        user = ensure_user(slot)
        iso = jail.choose_isolation(slot=slot)
        why = template.unavailable_reason(iso)
        if why:
            print(f"no template here: {why}", file=sys.stderr)
            return 2
        tpl_folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"autograder-bench-template-{os.getpid()}"
        t0 = time.perf_counter()
        tpl = template.KernelTemplate(tpl_folder, modules).start()
        template_start = {
            "wall_s": time.perf_counter() - t0,
            "cpu_s": own_cpu_s(tpl.proc.pid),
            "rss_mb": rss_mb(tpl.proc.pid),
            "imported": tpl.ready.get("imported"),
            "left_out": tpl.ready.get("left_out"),
        }
        try:

            def one(kind: str) -> dict:
                base, rundir, site, workspace = fresh_folders(user)
                owner = (user.uid, user.gid)
                try:
                    group = CpuGroup(f"template-bench-{kind}")
                    groups.append(group)
                    if kind == "fresh":

                        def build(kernel_argv):
                            argv = jail.kernel_command(iso, limits, workspace, rundir, site, kernel_argv)[0]
                            return join_prefix(group) + argv

                    else:
                        template_build = template.kernel_builder(tpl, user, limits, workspace, rundir, site)

                        def build(kernel_argv):
                            argv = template_build(kernel_argv)
                            request = json.loads(argv[-1])
                            request["cgroup_procs"] = [str(group.procs)]  # the child joins before it unshares
                            return [*argv[:-1], json.dumps(request)]

                    launcher_before = children_seconds()
                    wall = asyncio.run(run_kernel(build, rundir, workspace, owner, cells))
                    # every process of the run has exited (a shutdown request, waited for): the group
                    # holds its CPU; the launcher (template side) is our own child, outside the group
                    cpu = group.seconds() + (children_seconds() - launcher_before if kind == "template" else 0.0)
                    return {"wall_s": wall, "cpu_s": cpu}
                finally:
                    reap_user(user)
                    while groups:
                        groups.pop().remove()
                    remove_tree(workspace, ignore_errors=True)
                    remove_tree(base, ignore_errors=True)

            groups: list[CpuGroup] = []
            log_file = tpl_folder / "template.log"
            try:
                one("template")  # unrecorded warm-up of both paths (bytecode, page cache)
            except RuntimeError:
                print(log_file.read_text()[-2000:], file=sys.stderr)
                raise
            one("fresh")
            runs = interleaved(
                {"fresh": lambda r: one("fresh"), "template": lambda r: one("template")},
                args.rounds,
                log=lambda m: print(m, file=sys.stderr),
            )
            entry = [jail_entry(tpl, user, limits) for _ in range(args.rounds)]
        finally:
            tpl.stop()
            remove_tree(tpl_folder, ignore_errors=True)
    out: dict = {"modules": modules, "cells": len(cells), "template_start": template_start, "isolation": iso.mode}
    out["jail_entry"] = {key: spread([e[key] for e in entry]) for key in ("wall_s", "cpu_s")}
    for key in ("wall_s", "cpu_s"):
        fresh = [r[key] for r in runs["fresh"]]
        warm = [r[key] for r in runs["template"]]
        out[key] = {
            "fresh": spread(fresh),
            "template": spread(warm),
            "saved": spread(paired_diffs(fresh, warm)),
            "ratio": spread(paired_ratios(warm, fresh)),
        }
    print(json.dumps(out, indent=1))
    print(
        f"fresh kernel + {len(cells)} import cells: wall {out['wall_s']['fresh']['median']:.2f} s, "
        f"CPU {out['cpu_s']['fresh']['median']:.2f} s; template: wall {out['wall_s']['template']['median']:.2f} s, "
        f"CPU {out['cpu_s']['template']['median']:.2f} s; saved per submission (paired medians): wall "
        f"{out['wall_s']['saved']['median']:.2f} s, CPU {out['cpu_s']['saved']['median']:.2f} s; template start "
        f"once per slot: wall {template_start['wall_s']:.2f} s, CPU {template_start['cpu_s']:.2f} s, "
        f"{template_start['rss_mb']:.0f} MB resident; left out (their import starts a thread): "
        f"{', '.join(template_start['left_out'] or []) or 'none'}; the jail's entry alone (a child that runs "
        f"`pass`): wall {out['jail_entry']['wall_s']['median'] * 1000:.0f} ms, CPU "
        f"{out['jail_entry']['cpu_s']['median'] * 1000:.0f} ms",
        file=sys.stderr,
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
