"""Gradescope's container: the reference and the slowest legal notebook through the real
``run_autograder`` in the simulated Gradescope container (autograder/gradescope/sim/container.py),
at Gradescope's defaults (768 MB, 0.5 CPU) and at the recommended settings
(autograder/gradescope/budget.py), each in a fresh container of the zip's image.

Figures per run: wall time of the container (start to exit, setup.sh's image build excluded),
the cgroup's peak memory for the whole process tree (``memory.max_usage_in_bytes``: anonymous
memory and page cache; and the sampled peak of anonymous + shared memory, which cannot be
reclaimed), CPU seconds, score and status. The slowest legal notebook is the reference with four
more cells of 108 s each (under the 120 s cell limit; with the reference's own cells they fill
the 480 s notebook deadline but for a safety margin) and functions that make the probe take
~100 s of its 120 s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat

from .common import ROOT, example, interleaved, log, median, spread
from .format import fmt_mb, fmt_s, goal

GOAL_REFERENCE_S = 60.0
SLEEP_CELL_S = 108.0
PROBE_DELAY_S = 1.6  # per probe call: 61 cases → ~100 s of the probe's 120 s
SLOW_CELLS = 4

SLOW_PROBE = f"""
import time as _time
def _slow(f):
    def wrapped(*args, **kwargs):
        _time.sleep({PROBE_DELAY_S})
        return f(*args, **kwargs)
    return wrapped
quantize, dequantize, choose_qparams = _slow(quantize), _slow(dequantize), _slow(choose_qparams)
"""


def slowest_notebook(target: Path) -> Path:
    """The reference plus cells at the cell limit and a slow probe (see the module's docstring)."""
    nb = nbformat.read(example("reference"), as_version=4)
    for _ in range(SLOW_CELLS):
        nb.cells.append(nbformat.v4.new_code_cell(f"import time\ntime.sleep({SLEEP_CELL_S})"))
    nb.cells.append(nbformat.v4.new_code_cell(SLOW_PROBE))
    nbformat.write(nb, target)
    return target


def _one(image: Any, notebook: Path, memory_mb: int, cpus: float, timeout_s: float) -> dict[str, Any]:
    from autograder.gradescope.sim.simulate import run_in_image

    sim = run_in_image(image, notebook, memory_mb=memory_mb, cpus=cpus, timeout_s=timeout_s)
    s = sim.summary()
    return {
        "wall_s": sim.wall_s,
        "max_usage_mb": s["memory_max_usage_mb"],
        "peak_rss_mb": s["peak_rss_mb"],
        "cpu_s": s["cpu_seconds"],
        "score": s["score"],
        "status": s["status"],
        "oom_kills": s["oom_kills"],
        "timed_out": sim.timed_out,
        "isolation": s["isolation"],
    }


def run(cfg: dict[str, Any], workdir: Path) -> dict[str, Any]:
    from autograder.assignment import load_assignment
    from autograder.gradescope.budget import budget
    from autograder.gradescope.build import build_zip
    from autograder.gradescope.sim.image import image_for
    from autograder.gradescope.sim.simulate import GRADESCOPE_CPUS, GRADESCOPE_MEMORY_MB

    assignment = load_assignment("07-quantization", root=ROOT)
    b = budget(assignment)
    zip_path = build_zip(assignment.id, workdir / "gradescope" / "autograder.zip", root=ROOT).zip_path
    slow = slowest_notebook(workdir / "gradescope" / "slowest_legal.ipynb")
    settings = {"default": (GRADESCOPE_MEMORY_MB, GRADESCOPE_CPUS), "recommended": (b.memory_mb, GRADESCOPE_CPUS)}
    out: dict[str, Any] = {
        "timeout_s": b.timeout_s,
        "settings": {k: {"memory_mb": m, "cpus": c} for k, (m, c) in settings.items()},
        "ceiling_s": b.ceiling_s,
        "notebooks": {},
    }
    with image_for(zip_path) as image:
        log(f"gradescope: image {image.key} ({image.base})")
        for name, notebook, rounds in (
            ("reference", example("reference"), cfg.get("gradescope_rounds", 3)),
            ("slowest legal", slow, cfg.get("gradescope_slow_rounds", 1)),
        ):
            variants = {
                k: (lambda r, m=m, c=c, nb=notebook: _one(image, nb, m, c, b.timeout_s))
                for k, (m, c) in settings.items()
            }
            runs = interleaved(variants, rounds, log=log, label=f"gradescope {name}: ")
            out["notebooks"][name] = {k: _summarise(v) for k, v in runs.items()}
    return out


def _summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "wall_s": spread([r["wall_s"] for r in runs]),
        "max_usage_mb": median([r["max_usage_mb"] for r in runs]),
        "peak_rss_mb": median([r["peak_rss_mb"] for r in runs]),
        "cpu_s": median([r["cpu_s"] for r in runs]),
        "scores": [r["score"] for r in runs],
        "statuses": [r["status"] for r in runs],
        "oom_kills": [r["oom_kills"] for r in runs],
        "timed_out": [r["timed_out"] for r in runs],
        "isolation": sorted({str(r["isolation"]) for r in runs}),
        "rounds": len(runs),
    }


def goals(result: dict[str, Any] | None) -> list[dict[str, Any]]:
    ref = ((result or {}).get("notebooks") or {}).get("reference", {}).get("default")
    measured = (ref or {}).get("wall_s", {}).get("median")
    return [
        goal(
            "reference in Gradescope's default container (768 MB, 0.5 CPU): wall time",
            measured,
            GOAL_REFERENCE_S,
            "s",
            lower_is_better=True,
            fix="measure where the time goes (cpu_s vs wall) and raise the CPU setting",
        )
    ]


def section(result: dict[str, Any] | None) -> list[str]:
    lines = ["## 6 · Gradescope container", ""]
    if not result:
        return lines + ["Not run.", ""]
    lines += [
        "`run_autograder` in the simulated Gradescope container (root with Docker's 14 capabilities and "
        "default seccomp profile, its own mount and PID namespaces, a memory and CPU cgroup; bubblewrap "
        "cannot start there, so the grader uses the fallback jail), one fresh container per run. Wall "
        "time: container start to exit. Peak: the cgroup's `memory.max_usage_in_bytes` for the whole "
        "tree (grader, kernel, ONNX child; page cache included) and, in brackets, the sampled peak of "
        "memory that cannot be reclaimed. The machine is shared and often loaded: medians.",
        "",
        f"Recommended settings (`autograder gradescope build`): timeout {result['timeout_s'] // 60} min, memory "
        f"{result['settings']['recommended']['memory_mb']} MB, 0.5 CPU; the worst legal notebook is bounded by "
        f"{result['ceiling_s']:.0f} s.",
        "",
        "| notebook | settings | rounds | wall (median) | peak memory | CPU s | score | status | OOM kills |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, per in result["notebooks"].items():
        for setting, r in per.items():
            s = result["settings"][setting]
            lines.append(
                f"| {name} | {setting} ({s['memory_mb']} MB, {s['cpus']:g} CPU) | {r['rounds']} | "
                f"{fmt_s(r['wall_s']['median'])} | {fmt_mb(r['max_usage_mb'])} ({fmt_mb(r['peak_rss_mb'])}) | "
                f"{r['cpu_s']:.0f} | {', '.join(f'{x:g}' for x in r['scores'] if x is not None)} | "
                f"{', '.join(map(str, r['statuses']))} | {sum(r['oom_kills'])} |"
            )
    lines += [
        "",
        f"The slowest legal notebook: the reference plus {SLOW_CELLS} cells of {SLEEP_CELL_S:g} s (cell "
        f"limit 120 s; together they fill the 480 s notebook deadline but for a margin) and functions that sleep "
        f"{PROBE_DELAY_S:g} s per call, so the probe takes ~100 s of its 120 s. Its time is set by the limits, "
        "not by the CPU. The timeout to set covers more than it reaches: the kernel's 60 s startup limit and "
        "60 s per measured model are bounds that a notebook cannot force.",
        "",
    ]
    return lines
