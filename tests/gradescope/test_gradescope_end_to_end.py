"""The shipped ``run_autograder`` script on a simulated ``/autograder`` made from the real zip:
the real jail, kernels and ONNX Runtime, exactly the files Gradescope would unpack.

``GRADESCOPE_ROOT`` and ``AUTOGRADER_VENV`` point the script at the simulated root and this
checkout's venv; everything else is what runs on Gradescope. Real notebook runs are few (reference,
untouched, hostile: ~15 s each) and marked slow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from gradescope_testlib import ASSIGNMENT, mode_of, unpack_root

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "assignments" / ASSIGNMENT / "examples"
PROTECTED = (f"reference/{ASSIGNMENT}/tolerances.toml", f"assignments/{ASSIGNMENT}/rubric.toml")


def run_autograder(root: Path, timeout: float = 600, **extra_env: str) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOGRADER_ROOT", "AUTOGRADER_JAIL")}
    env.update({"GRADESCOPE_ROOT": str(root), "AUTOGRADER_VENV": sys.prefix, **extra_env})
    done = subprocess.run(
        [str(root / "source" / "run_autograder")], env=env, cwd=root, capture_output=True, text=True, timeout=timeout
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, f"run_autograder exited {done.returncode}:\n{log[-4000:]}"
    return json.loads((root / "results" / "results.json").read_text()), log


@pytest.fixture
def sim_root(gradescope_zip, world_readable_tmp) -> Path:
    root = unpack_root(gradescope_zip, world_readable_tmp)
    for d in (root, root / "submission", root / "results"):
        d.chmod(0o755)  # as open as Gradescope may leave them
    return root


@pytest.fixture
def zip_wheel_only(gradescope_zip, world_readable_tmp) -> Path:
    """``/opt/autograder`` as setup.sh lays it out, with the grader's package installed from the
    zip's wheel alone into ``grader/`` (the venv beside it is this checkout's, for its libraries):
    the instructor's simulator does not exist there. Returns the venv path for AUTOGRADER_VENV."""
    opt = world_readable_tmp / "opt"
    opt.mkdir()
    with zipfile.ZipFile(gradescope_zip) as zf:
        wheel_name = json.loads(zf.read("gradescope.json"))["wheel"]
        (opt / wheel_name).write_bytes(zf.read(wheel_name))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-compile",
            "--disable-pip-version-check",
            "--target",
            str(opt / "grader"),
            str(opt / wheel_name),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (opt / "venv").symlink_to(sys.prefix)
    for d in [opt, *(p for p in (opt / "grader").rglob("*") if p.is_dir())]:
        d.chmod(0o755)
    probe = (
        "import autograder, importlib.util as u; print(autograder.__file__); "
        "print(u.find_spec('autograder.gradescope.sim'))"
    )
    done = subprocess.run(
        [str(opt / "venv" / "bin" / "python"), "-P", "-c", probe],
        cwd=world_readable_tmp,
        env={**os.environ, "PYTHONPATH": str(opt / "grader")},
        capture_output=True,
        text=True,
        check=True,
    )
    package, sim = done.stdout.split()
    assert Path(package).is_relative_to(opt / "grader") and sim == "None", done.stdout
    return opt / "venv"


def submit(root: Path, *notebooks: Path, names: tuple[str, ...] = ()) -> None:
    for i, nb in enumerate(notebooks):
        target = root / "submission" / (names[i] if names else nb.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(nb.read_bytes())


def test_no_notebook_gives_a_zero_through_the_real_script(sim_root, results_validator):
    (sim_root / "submission" / "answers.txt").write_text("42")
    results, log = run_autograder(sim_root, timeout=120)
    results_validator(results)
    assert (
        results["score"] == 0.0 and "No notebook" in results["output"] and "It holds answers.txt." in results["output"]
    )
    assert "`" not in results["output"], "a file name is plain text: no literal backticks for the student"
    assert "nothing graded" in log
    assert mode_of(sim_root / "source") & 0o077 == 0


def test_two_notebooks_give_a_zero_through_the_real_script(sim_root, results_validator):
    submit(sim_root, EXAMPLES / "untouched.ipynb", EXAMPLES / "untouched.ipynb", names=("a.ipynb", "b/c.ipynb"))
    results, _ = run_autograder(sim_root, timeout=120)
    results_validator(results)
    assert results["score"] == 0.0 and "2 notebooks" in results["output"]


@pytest.mark.kernel
@pytest.mark.slow
def test_reference_solution_gets_full_marks_and_a_leaderboard_entry(sim_root, results_validator):
    submit(sim_root, EXAMPLES / "reference.ipynb")
    (sim_root / "submission_metadata.json").write_text(json.dumps({"id": 42, "created_at": "2026-01-01T00:00:00Z"}))
    results, log = run_autograder(sim_root)
    results_validator(results)
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) == 100, results["output"]
    assert all(t["status"] == "passed" for t in results["tests"])
    (picture,) = [t for t in results["tests"] if "figure" in t["tags"]]  # drawn as PNG alone there
    assert '<img src="data:image/png;base64,' in picture["output"], picture["output"][:300]
    assert results["extra_data"]["gradescope"] == {
        "assignment": ASSIGNMENT,
        "submission_id": 42,
        "created_at": "2026-01-01T00:00:00Z",
        "notebook": "reference.ipynb",
    }
    board = {e["name"]: e for e in results["leaderboard"]}
    assert board["Smallest int8 model (KB)"]["order"] == "asc" and 0 < board["Smallest int8 model (KB)"]["value"]
    assert "score 100" in log


@pytest.mark.kernel
@pytest.mark.slow
def test_untouched_notebook_gets_a_low_valid_score(sim_root, results_validator):
    submit(sim_root, EXAMPLES / "untouched.ipynb")
    results, _ = run_autograder(sim_root)
    results_validator(results)
    assert results["score"] < 50
    assert {t["tags"][0] for t in results["tests"]} >= {"quantize", "dynamic_model", "static_model"}
    assert "leaderboard" not in results


def test_the_zips_wheel_alone_writes_a_valid_result(sim_root, zip_wheel_only, results_validator):
    (sim_root / "submission" / "answers.txt").write_text("42")
    results, log = run_autograder(sim_root, timeout=120, AUTOGRADER_VENV=str(zip_wheel_only))
    results_validator(results)
    assert results["score"] == 0.0 and "No notebook" in results["output"] and "Traceback" not in log


@pytest.mark.slow
def test_the_zips_wheel_alone_grades_a_notebook_without_the_simulator(sim_root, zip_wheel_only, results_validator):
    """What ships to Gradescope grades on its own: the simulator is absent, so any import of it on
    the grading path would turn this run into the grader's own failure."""
    submit(sim_root, EXAMPLES / "untouched.ipynb")
    results, log = run_autograder(sim_root, AUTOGRADER_VENV=str(zip_wheel_only))
    results_validator(results)
    assert "Traceback" not in log and "grader_error" not in json.dumps(results), log[-3000:]
    assert results["extra_data"]["execution"]["status"] == "completed"
    assert {t["tags"][0] for t in results["tests"]} >= {"quantize", "dynamic_model", "static_model"}
    assert results["score"] < 50


def test_simulate_in_the_zips_wheel_is_one_line_saying_it_is_the_instructors_tool(
    gradescope_zip, zip_wheel_only, tmp_path
):
    nb = tmp_path / "a.ipynb"
    nb.write_text(nbformat.writes(nbformat.v4.new_notebook()))
    done = subprocess.run(
        [
            str(zip_wheel_only / "bin" / "python"),
            "-P",
            "-m",
            "autograder.cli",
            "gradescope",
            "simulate",
            str(gradescope_zip),
            str(nb),
        ],
        env={**os.environ, "PYTHONPATH": str(zip_wheel_only.parent / "grader")},
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "instructor's tool" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def require_jail(jail: str, monkeypatch) -> None:
    """Skip, with the reason, when this machine cannot start a kernel in ``jail`` (the fallback
    needs the venv's Python where the sandbox uid can read it, as /opt/autograder is on Gradescope)."""
    from autograder.errors import SandboxUnavailableError
    from autograder.jail import jail as jail_module

    monkeypatch.setenv("AUTOGRADER_JAIL", jail)
    try:
        jail_module.choose_isolation()
    except SandboxUnavailableError as e:
        pytest.skip(f"the {jail} jail cannot start here: {str(e)[:300]}")


HOSTILE_WRITE = """
import json, os
forged = json.dumps({"score": 100.0, "output": "FORGED BY THE NOTEBOOK", "tests": []})
outcome = {}
for target in ["/autograder/results/results.json", "../results/results.json", "results/results.json",
               "%(root)s/results/results.json", "%(root)s/results/forged.json"]:
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(forged)
        outcome[target] = "written"
    except Exception as e:
        outcome[target] = type(e).__name__
print(outcome)
"""
HOSTILE_TAMPER = """
for target in %(protected)r:
    try:
        with open("%(root)s/source/" + target, "a") as f:
            f.write("\\n# tampered by the notebook\\n")
        print("tampered", target)
    except Exception as e:
        print(target, type(e).__name__)
"""


@pytest.mark.kernel
@pytest.mark.slow
@pytest.mark.parametrize("jail", ["bwrap", "fallback"])  # fallback: as under Docker's seccomp on Gradescope
def test_hostile_notebook_cannot_forge_results_or_touch_the_grader(sim_root, results_validator, jail, monkeypatch):
    require_jail(jail, monkeypatch)
    subs = {"root": str(sim_root), "protected": list(PROTECTED)}
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(HOSTILE_WRITE % subs), nbformat.v4.new_code_cell(HOSTILE_TAMPER % subs)]
    )
    (sim_root / "submission" / "attack.ipynb").write_text(nbformat.writes(nb))
    before = {p: (sim_root / "source" / p).read_bytes() for p in PROTECTED}
    results, _ = run_autograder(sim_root, AUTOGRADER_JAIL=jail)
    results_validator(results)
    assert results["extra_data"]["isolation"]["mode"] == jail
    assert "FORGED" not in json.dumps(results) and results["score"] < 50
    assert results["extra_data"]["execution"]["status"] == "completed", "the attack cells must have run"
    assert results["extra_data"]["execution"]["cells_errored"] == 0
    assert sorted(p.name for p in (sim_root / "results").iterdir()) == ["results.json"]
    assert {p: (sim_root / "source" / p).read_bytes() for p in PROTECTED} == before
