"""Smoke tests of the benchmark scripts: the entry point parses, and RESULTS.md is written from fake numbers.

No notebook runs here and no timing is asserted: the numbers are made up, the tests check the
document's structure and the goal verdicts computed from them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import report_md  # noqa: E402
from bench.common import paired_diffs, paired_ratios, round_order, spread  # noqa: E402


def fake_results() -> dict:
    overhead_nb = {
        "bare_s": spread([20.0, 21.0, 22.0]),
        "bare_1t_s": spread([10.0, 11.0, 12.0]),
        "grade_s": spread([12.0, 12.5, 14.0]),
        "ratio_plain": spread([0.6, 0.6, 0.64]),
        "overhead_s": spread([2.0, 1.5, 2.0]),
        "ratio": spread([1.2, 1.14, 1.17]),
        "cli_s": spread([13.0, 13.5, 15.0]),
        "cli_overhead_s": spread([3.0, 2.5, 3.0]),
        "cli_ratio": spread([1.3, 1.23, 1.25]),
        "stages_s": {"setup": 0.01, "execute": 11.0, "measure": 1.2, "judge": 0.1},
        "execution_s": 10.5,
        "status": ["completed"],
        "isolation": ["bwrap"],
        "score": [100.0],
        "max_score": 100.0,
        "bare_cells_errored": [0],
    }
    memory_summary = {
        "total_mb": 900.0,
        "grader_mb": 450.0,
        "kernel_mb": 446.0,
        "pss_total_mb": 700.0,
        "pss_grader_mb": 250.0,
        "pss_kernel_mb": 440.0,
        "kernel_hwm_mb": 450.0,
        "grader_hwm_mb": 200.0,
        "kernel_users": ["autograder-sb0"],
        "rounds": 2,
    }
    batch_cfg = {
        "wall_s": spread([300.0]),
        "per_submission_s": 15.0,
        "throughput_per_min": 4.0,
        "runs": [{"executed": 20, "cached": 0, "statuses": {"graded": 20}, "with_results": 20, "submissions": 20}],
    }
    return {
        "config": {"mode": "full", "only": ["overhead", "batch", "rescore", "memory"]},
        "machine": {
            "date": "2026-01-01 00:00:00 UTC",
            "cores": 2,
            "cores_usable": 2,
            "cpu_model": "Fake CPU",
            "memory_bytes": 8 * 2**30,
            "os": "Linux 6",
            "python": "3.11.7",
            "uid": 0,
            "git": "abc1234",
            "versions": {"onnxruntime": "1.32.0", "otter-grader": "7.0.0"},
            "load_average_start": [0.1, 0.1, 0.1],
            "load_average_end": [1.0, 1.0, 1.0],
        },
        "isolation": {"mode": "bwrap", "layers": ["bwrap", "netns"], "warnings": []},
        "overhead": {
            "rounds": 3,
            "variants": ["bare", "bare_1t", "grade", "cli"],
            "cell_timeout_s": 120,
            "notebooks": {"reference": overhead_nb},
            "cli_startup_s": spread([0.5, 0.6, 0.55]),
        },
        "batch": {
            "size": 20,
            "rounds": 1,
            "examples": ["reference", "untouched"],
            "last_out": "/nowhere",
            "otter": {
                "zip": "x.zip",
                "seconds": 2.0,
                "change": "generate: false → generate: true",
                "tests": ["q1", "q2"],
            },
            "configs": {
                "autograder -j 1": batch_cfg,
                "otter ×1": batch_cfg,
                "autograder -j 2": batch_cfg,
                "otter ×2": batch_cfg,
                "bare ×2, 1 thread": batch_cfg,
            },
            "ratios": {
                "otter ×2 / autograder -j 2": spread([1.6]),
                "autograder -j 1 / autograder -j 2": spread([1.5]),
                "autograder -j 2 / bare ×2, 1 thread": spread([1.04]),
            },
            "memory_per_in_flight": {
                "autograder -j 2": {
                    "total_mb": 520.0,
                    "grader_mb": 120.0,
                    "kernel_mb": 400.0,
                    "kernel_hwm_mb": 430.0,
                    "grader_hwm_mb": 150.0,
                    "pss_total_mb": None,
                }
            },
        },
        "rescore": {
            "size": 100,
            "rounds": 5,
            "source": "/nowhere",
            "cli_available": True,
            "gradebook_rows": 100,
            "seconds": {"cli": spread([3.0, 3.1]), "in-process": spread([2.0, 2.1])},
        },
        "memory": {
            "notebook": "reference.ipynb",
            "rounds": 2,
            "class_size": 4,
            "class_rounds": 1,
            "variants": {
                "autograder grade": memory_summary,
                "autograder batch -j 2": {**memory_summary, "pss_total_mb": 650.0},
            },
        },
        "elapsed_s": 1200.0,
        "notes": ["a note"],
    }


def test_run_py_help_works():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    for option in ("--quick", "--only", "--rounds", "--batch-rounds", "--render-only"):
        assert option in proc.stdout, f"bench/run.py --help does not mention {option}"


def test_results_md_has_every_section_and_the_machine():
    data = fake_results()
    data["goals"] = report_md.all_goals(data)
    text = report_md.render(data)
    assert text.startswith(report_md.HEADER), "RESULTS.md must say it is generated"
    for title in (report_md.TITLE, "## Machine", "## Goals", *report_md.SECTION_TITLES, "## Notes"):
        assert title in text, f"RESULTS.md lacks the heading {title!r}"
    assert "Fake CPU" in text and "2 cores" in text and "8.0 GiB" in text and "2026-01-01" in text
    assert "otter-grader 7.0.0" in text
    assert "generate: false → generate: true" in text
    assert "| `reference` | 21.00 s | 11.00 s | 12.50 s | +2.00 s | 1.17× |" in text, "overhead row"
    assert "overhead ≤ 10 % of bare (1 thread)" in text


def test_goal_verdicts_follow_the_fake_numbers():
    data = fake_results()
    goals = {g["subject"]: g for g in report_md.all_goals(data)}
    by_prefix = lambda p: next(g for s, g in goals.items() if s.startswith(p))  # noqa: E731
    assert by_prefix("grade (in-process) overhead ≤ 10 %")["met"] is False  # 1.17 > 1.10
    assert by_prefix("grade (in-process) overhead ≤ 1 s")["met"] is False  # 2.0 s
    assert by_prefix("`batch -j 2` vs otter")["met"] is True  # 1.6 ≥ 1.5
    assert by_prefix("`batch -j 2` vs `-j 1`")["met"] is False  # 1.5 < 1.8
    vs_bare = by_prefix("`batch -j 2` vs bare nbclient")
    assert vs_bare["measured"] == pytest.approx(1.04) and vs_bare["met"] is False  # slower than the floor
    assert "section 7" in vs_bare["fix"], "a missed floor points at the CPU budget's stages"
    assert by_prefix("`autograder rescore`")["met"] is True  # 3.0 < 5
    mem = by_prefix("peak memory")
    assert mem["measured"] == pytest.approx(700.0) and mem["met"] is False  # the worst run's PSS counts
    assert "PSS" in mem["subject"]
    text = report_md.render({**data, "goals": list(goals.values())})
    assert "missed** by 7.0 percentage points" in text
    assert "What would close it:" in text


def test_missing_benchmarks_render_as_not_run():
    text = report_md.render({"config": {"mode": "quick", "only": ["rescore"]}, "machine": {}, "goals": []})
    assert text.count("Not run.") == 5


def test_pairing_and_order_helpers():
    assert paired_diffs([3.0, None, 5.0], [1.0, 2.0, 4.0]) == [2.0, 1.0]
    assert paired_ratios([4.0, 3.0], [2.0, 0.0]) == [2.0]
    assert round_order(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert round_order(["a", "b", "c"], 1) == ["c", "b", "a"]
    assert spread([3.0, 1.0, 2.0])["median"] == 2.0


def test_dask_section_goals_and_splice_into_an_existing_results_md():
    from bench import bench_dask

    dask = {
        "class": {
            "size": 12,
            "rounds": 2,
            "local_s": spread([60.0, 62.0]),
            "dask_s": spread([64.0, 66.0]),
            "ratio": spread([1.07, 1.06]),
            "same_scores": True,
            "statuses": {"ok": 12},
            "kernels": {"-j 2": {"template": 12}, "--scheduler local:2": {"fresh": 1, "template": 11}},
        },
        "overhead": {
            "tasks": 1000,
            "rounds": 3,
            "dask_ms": spread([30.0, 31.0, 29.0]),
            "local_ms": spread([20.0, 19.0, 21.0]),
            "diff_ms": spread([10.0, 12.0, 8.0]),
            "client_cpu_ms": spread([9.0, 9.5, 10.0]),
        },
    }
    goals = bench_dask.goals(dask)
    assert [g["met"] for g in goals] == [True, True]  # 1.065 ≤ 1.10; 10 ms ≤ 20
    assert "10,000 submissions on 50 workers" in "\n".join(bench_dask.estimate(dask))
    full = report_md.render(fake_results())
    data = {"config": {"only": ["dask"]}, "machine": {"date": "2026-02-02", "git": "def5678"}, "dask": dask}
    spliced = report_md.splice(full, data)
    assert spliced.count(bench_dask.TITLE) == 1 and "Measured on its own" in spliced and "2026-02-02" in spliced
    assert "-j 2: template 12; --scheduler local:2: fresh 1, template 11." in spliced, "which kernels each engine got"
    assert spliced.count("Dask scheduler path: overhead per task") == 2, "one goal row and one verdict line"
    before = [
        line
        for line in spliced.split(bench_dask.TITLE)[0].split("\n")
        if not line.startswith(("| `batch --scheduler", "| Dask scheduler path"))
    ]
    assert before == full.split(bench_dask.TITLE)[0].split("\n"), "nothing else changed but the two goal rows"
    again = report_md.splice(spliced, {**data, "dask": {**dask, "class": {**dask["class"], "ratio": spread([1.5])}}})
    assert again.count("Dask scheduler path: overhead per task") == 2 and "1.500×" in again, "replaced, not added"


def test_batch_splice_replaces_its_section_and_goal_rows_even_when_a_target_changed():
    from bench import bench_otter
    from bench.format import SECTION_TITLES

    full = report_md.render(fake_results())
    older = full.replace(f"speed-up ≥ {bench_otter.GOAL_VS_OTTER}×", "speed-up ≥ 1.5×")  # an older goal's rows
    assert "speed-up ≥ 1.5×" in older
    batch = fake_results()["batch"]
    batch = {**batch, "ratios": {**batch["ratios"], "autograder -j 1 / autograder -j 2": spread([1.95])}}
    data = {"config": {"only": ["batch"]}, "machine": {"date": "2026-03-03", "git": "feed123"}, "batch": batch}
    spliced = report_md.splice(older, data)
    table = spliced.split("## Goals")[1].split("\n## ")[0]
    assert "speed-up ≥ 1.5×" not in table, "the older target's row is replaced"
    assert table.count("| `batch -j 2` vs `-j 1`") == 1 and "1.95×" in table
    assert (
        spliced.count(SECTION_TITLES[1]) == 1 and "Measured on its own (batch benchmark only) on 2026-03-03" in spliced
    )
    assert spliced.split(SECTION_TITLES[1])[1].split("\n## ")[0].count("1.95×") >= 1, "the section is the new one"
    assert spliced.split(SECTION_TITLES[2])[1] == older.split(SECTION_TITLES[2])[1], "later sections are kept"


def test_bare_floor_row_and_its_goal_in_the_batch_section():
    from bench import bench_otter
    from bench.format import SECTION_TITLES

    data = fake_results()
    text = report_md.render({**data, "goals": report_md.all_goals(data)})
    batch = text.split(SECTION_TITLES[1])[1].split("\n## ")[0]
    assert "| bare ×2, 1 thread | 300.00 s |" in batch and "20/20 ran" in batch, "bare runs no results.json"
    assert "| autograder -j 2 / bare ×2, 1 thread | 1.04× |" in batch
    met = {**data["batch"], "ratios": {"autograder -j 2 / bare ×2, 1 thread": spread([0.97])}}
    assert [g["met"] for g in bench_otter.goals(met) if "bare nbclient" in g["subject"]] == [True]


def test_memory_splice_replaces_its_section_and_goal_row():
    from bench.format import SECTION_TITLES

    full = report_md.render(fake_results())
    memory = {**fake_results()["memory"]}
    memory["variants"] = {"autograder grade": {**memory["variants"]["autograder grade"], "pss_total_mb": 321.0}}
    data = {"config": {"only": ["memory"]}, "machine": {"date": "2026-04-04", "git": "0ddba11"}, "memory": memory}
    spliced = report_md.splice(full, data)
    section = spliced.split(SECTION_TITLES[3])[1].split("\n## ")[0]
    assert "Measured on its own (memory benchmark only) on 2026-04-04" in section and "321 MB" in section
    assert "The timed batch runs of section 2" not in section, "no batch ran with it: no stale batch table"
    table = spliced.split("## Goals")[1].split("\n## ")[0]
    assert table.count("| peak memory per submission in flight") == 1 and "321 MB" in table
    assert spliced.split(SECTION_TITLES[4])[1] == full.split(SECTION_TITLES[4])[1], "later sections are kept"


@pytest.mark.kernel
def test_bare_batch_runs_plain_nbclient_two_at_a_time(tmp_path):
    """The floor really runs every notebook (two worker processes, fresh kernels) and times the whole."""
    import nbformat

    from bench import bench_otter

    notebooks = []
    for i in range(3):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"import os\nx = {i}")])
        path = tmp_path / f"n{i}.ipynb"
        nbformat.write(nb, str(path))
        notebooks.append(path)
    bad = tmp_path / "not_a_notebook.ipynb"
    bad.write_text("{")
    ok = bench_otter.bare_batch(notebooks, tmp_path / "out", 2, 120)
    assert ok["seconds"] and ok["seconds"] >= ok["per_submission_s"] > 0
    assert (ok["submissions"], ok["with_results"], ok["failed"]) == (3, 3, [])
    broken = bench_otter.bare_batch([*notebooks[:1], bad], tmp_path / "out2", 2, 120)
    assert broken["seconds"] is None and broken["failed"] == ["not_a_notebook"], "a failure is said, never timed"


def test_rounds_options_reach_the_config():
    from bench import run

    cfg = run.config_from(run.parse_args(["--only", "dask", "--dask-rounds", "2", "--dask-overhead-rounds", "1"]))
    assert (cfg["only"], cfg["dask_rounds"], cfg["dask_overhead_rounds"]) == (["dask"], 2, 1)
    default = run.config_from(run.parse_args(["--only", "dask"]))
    assert (default["dask_rounds"], default["dask_overhead_rounds"]) == (3, 3)
    with pytest.raises(SystemExit):
        run.config_from(run.parse_args(["--only", "nonsense"]))


def test_memory_sampler_counts_a_template_child_as_the_kernel():
    """A kernel template's child runs the kernel in-process (no ipykernel_launcher in its argv) as the
    slot's sandbox uid: its memory is the kernel's, the template's (root) the grader's."""
    import os

    from bench.memory_sampling import SANDBOX_USER_PREFIX, TreeSampler

    class Proc:
        def __init__(self, pid: int, name: str, cmd: list[str], user: str) -> None:
            self.pid, self._name, self._cmd, self._user = pid, name, cmd, user

        def name(self) -> str:
            return self._name

        def cmdline(self) -> list[str]:
            return self._cmd

        def username(self) -> str:
            return self._user

    sampler = TreeSampler(os.getpid())
    sampler.stop()
    serve = ["python3", "/x/autograder/kernel_template/template_process.py", "serve", "/tmp/t/sock"]
    table = [
        (Proc(10, "python3", ["python3", "-m", "ipykernel_launcher", "-f", "k.json"], "root"), "kernel"),
        (Proc(11, "python3", serve, f"{SANDBOX_USER_PREFIX}3"), "kernel"),
        (Proc(12, "python3", serve, "root"), "grader"),
        (Proc(13, "bwrap", ["bwrap", "--unshare-pid"], "root"), "jail"),
        (Proc(14, "python3", ["python3", "-c", "pass"], "root"), "kernel"),  # started by the kernel 11
        (Proc(15, "python3", ["python3", "-m", "autograder.measure.model_worker"], "root"), "grader"),
    ]
    parents = {14: 11, 15: 12}
    assert [sampler._kind(proc, parents) for proc, _ in table] == [kind for _, kind in table]
