"""The whole pipeline as Gradescope runs it: every bundled example through the real
``run_autograder`` in the simulated Gradescope container at Gradescope's defaults (768 MB,
0.5 CPU, root with Docker's capabilities and seccomp profile), where bubblewrap cannot start and
the grader must choose the fallback jail by itself. Each gets the grade ``make demo`` gives it
(reference/07-quantization/expected_examples.toml). About 15-30 s per example on 0.5 CPU.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from container_testlib import EXAMPLES, EXPECTED, FALLBACK_LAYERS, check_scores

from autograder.assignment import load_assignment
from autograder.gradescope.budget import budget
from autograder.gradescope.sim.simulate import GRADESCOPE_CPUS, GRADESCOPE_MEMORY_MB, run_in_image

pytestmark = pytest.mark.slow
PROTECTED = ("reference/07-quantization/tolerances.toml", "assignments/07-quantization/rubric.toml")


@pytest.fixture(scope="module")
def timeout_s() -> float:
    return budget(load_assignment("07-quantization")).timeout_s


def assert_fallback_held(results: dict) -> None:
    iso = results["extra_data"]["isolation"]
    assert iso["mode"] == "fallback", f"the grader did not fall back by itself: {iso}"
    assert FALLBACK_LAYERS <= set(iso["layers"]), iso
    assert any(layer.startswith("uid:autograder-sb") for layer in iso["layers"]), iso
    assert any("bwrap" in w for w in iso["warnings"]), "why bwrap was not used must be recorded"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_gets_its_demo_grade_in_gradescopes_container(gradescope_image, results_validator, name, timeout_s):
    sim = run_in_image(
        gradescope_image, EXAMPLES / name, memory_mb=GRADESCOPE_MEMORY_MB, cpus=GRADESCOPE_CPUS, timeout_s=timeout_s
    )
    assert sim.results is not None, f"no results.json; exit {sim.returncode}:\n{sim.stdout[-3000:]}"
    results_validator(sim.results)
    assert_fallback_held(sim.results)
    problems = check_scores(name, sim.results)
    assert not problems, f"{name} in the container: {problems}\n{sim.summary()}"
    container = sim.results["extra_data"]["container"]
    assert container == {"memory_limit_mb": 768, "oom_kills": 0, "oom_kills_while_grading": 0}, container
    assert not sim.timed_out and sim.stats.oom_kills == 0
    assert 0 < sim.stats.memory_max_usage_bytes <= GRADESCOPE_MEMORY_MB * 1024 * 1024


HOSTILE = """
import json, os
forged = json.dumps({"score": 100.0, "output": "FORGED BY THE NOTEBOOK", "tests": []})
outcome = {}
for target in ["/autograder/results/results.json", "/autograder/results/forged.json"]:
    try:
        with open(target, "w") as f:
            f.write(forged)
        outcome[target] = "written"
    except Exception as e:
        outcome[target] = type(e).__name__
for target in %(protected)r:
    try:
        with open("/autograder/source/" + target, "a") as f:
            f.write("tampered")
        outcome[target] = "tampered"
    except Exception as e:
        outcome[target] = type(e).__name__
for path in ["/autograder/source/gradescope.json", "/opt/autograder/venv/pyvenv.cfg", "/proc/1/environ"]:
    try:
        outcome["read " + path] = len(open(path).read())
    except Exception as e:
        outcome["read " + path] = type(e).__name__
outcome["env"] = sorted(os.environ)
print(outcome)
"""


def test_hostile_notebook_cannot_forge_results_or_touch_the_grader_in_the_container(
    gradescope_image, results_validator, tmp_path, timeout_s
):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(HOSTILE % {"protected": list(PROTECTED)})])
    path = tmp_path / "attack.ipynb"
    nbformat.write(nb, path)
    seen: dict = {}

    def inspect(root):
        seen["results"] = sorted(p.name for p in (root / "results").iterdir())
        seen["protected"] = {p: (root / "source" / p).read_bytes() for p in PROTECTED}

    sim = run_in_image(
        gradescope_image,
        path,
        timeout_s=timeout_s,
        inspect=inspect,
        env={"GRADESCOPE_SECRET_TOKEN": "token-the-kernel-must-not-see"},
    )
    results_validator(sim.results)
    assert_fallback_held(sim.results)
    assert sim.results["extra_data"]["execution"]["status"] == "completed", sim.summary()
    text = json.dumps(sim.results)
    assert "FORGED" not in text and "token-the-kernel-must-not-see" not in text and sim.results["score"] < 50
    assert seen["results"] == ["results.json"]
    assert all(b"tampered" not in data for data in seen["protected"].values())
