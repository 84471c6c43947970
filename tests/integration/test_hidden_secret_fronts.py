"""One hidden-data secret, three front ends, the same grade: the real ``grade``, ``batch`` and the
Gradescope zip's ``run_autograder``, through the real jail, kernels and ONNX Runtime.

The reference solution of lesson 07 is graded with a chosen secret in each front end (the zip is
built with it and the run reads it from the zip, as on Gradescope), and once more with another
secret. Everything that comes from the hidden test set must agree between the front ends and
differ with the other secret; no output holds the secret, only its fingerprint; a notebook cannot
read the secret file. Slow: five real notebook runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.manual_answers import TEST_SUFFIX
from autograder.hidden_secret import SECRET_ENV, SECRET_FILE, HiddenSecret
from needs import needs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = "07-quantization"
REFERENCE = ROOT / "assignments" / ASSIGNMENT / "examples" / "reference.ipynb"
CLI = [sys.executable, "-m", "autograder.cli"]
A, B = HiddenSecret(bytes(range(100, 132))), HiddenSecret(bytes(range(200, 232)))
# every measurement of a model that comes from the hidden split (not latency, not the public one)
HIDDEN_FACTS = ("accuracy", "quality")


def _env(secret_file: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (SECRET_ENV, "AUTOGRADER_ROOT", "AUTOGRADER_JAIL")}
    if secret_file is not None:
        env[SECRET_ENV] = str(secret_file)
    env.update(extra)
    return env


def _run(args: list, env: dict[str, str], timeout: float = 900) -> str:
    done = subprocess.run([str(a) for a in args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args[3:5]} exited {done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}"
    return done.stdout + done.stderr


def _hidden_facts(measurements: dict) -> dict:
    models = measurements["models"]
    return {name: {k: facts.get(k) for k in HIDDEN_FACTS} for name, facts in sorted(models.items())}


def _scores(results: dict) -> list[tuple[str, float]]:
    """Each graded test's score; the hand-graded answers Gradescope's front end adds (0 points,
    autograder/manual_answers.py) are not grades."""
    return [(t["name"], t["score"]) for t in results["tests"] if not t["name"].endswith(TEST_SUFFIX)]


@pytest.fixture(scope="module")
@needs("kernel")
def fronts(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("hidden-secret-fronts")
    files = {}
    for name, secret in (("a", A), ("b", B)):
        files[name] = tmp / f"{name}.secret"
        files[name].write_text(secret.text())
    out: dict = {}
    # grade, with A and with B
    for name in ("a", "b"):
        _run(CLI + ["grade", REFERENCE, "--out", tmp / f"grade-{name}", "--assignment", ASSIGNMENT], _env(files[name]))
        out[f"grade-{name}"] = tmp / f"grade-{name}"
    # batch, with A
    src = tmp / "submissions"
    src.mkdir()
    (src / "reference.ipynb").write_bytes(REFERENCE.read_bytes())
    _run(
        CLI + ["batch", src, "--out", tmp / "batch", "-j", "1", "--assignment", ASSIGNMENT, "--no-progress"],
        _env(files["a"]),
    )
    out["batch"] = tmp / "batch" / "reference"
    # the Gradescope zip built with A, unpacked as Gradescope does, run by its own script with no
    # secret in the environment: the zip's is the one
    zip_path = tmp / "autograder.zip"
    _run(CLI + ["gradescope", "build", ASSIGNMENT, "-o", zip_path], _env(files["a"]))
    world = Path(tempfile.mkdtemp(prefix="autograder-gs-secret-"))
    world.chmod(0o755)
    root = world / "autograder"
    for d in ("submission", "results"):
        (root / d).mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
        for info in zf.infolist():
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (root / "source" / info.filename).chmod(mode)
    (root / "submission" / f"{ASSIGNMENT}.ipynb").write_bytes(REFERENCE.read_bytes())
    out["gradescope_log"] = _run(
        [root / "source" / "run_autograder"], _env(None, GRADESCOPE_ROOT=str(root), AUTOGRADER_VENV=sys.prefix)
    )
    out["gradescope"] = json.loads((root / "results" / "results.json").read_text())
    out["zip"] = zip_path
    yield out
    subprocess.run(["rm", "-rf", str(world)], check=False)


def _load(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


def test_the_same_secret_gives_the_same_hidden_data_and_grade_in_every_front_end(fronts):
    graded, batched, gradescope = fronts["grade-a"], fronts["batch"], fronts["gradescope"]
    m_grade, m_batch = _load(graded, "measurements.json"), _load(batched, "measurements.json")
    assert m_grade["assignment"]["hidden_secret"] == m_batch["assignment"]["hidden_secret"] == A.fingerprint()
    assert gradescope["extra_data"]["assignment"]["hidden_secret"] == A.fingerprint(), (
        "Gradescope graded with the secret in its zip"
    )
    assert _hidden_facts(m_grade) == _hidden_facts(m_batch), "the same hidden split in grade and batch"
    assert m_grade["functions"] == m_batch["functions"], "the same probe cases, the same answers"
    r_grade, r_batch = _load(graded, "results.json"), _load(batched, "results.json")
    assert _scores(r_grade) == _scores(r_batch) == _scores(gradescope)
    assert r_grade["score"] == r_batch["score"] == gradescope["score"]
    assert gradescope["extra_data"]["checks"] == r_grade["extra_data"]["checks"]
    assert (
        m_grade["assignment"]["fingerprint"]
        == m_batch["assignment"]["fingerprint"]
        == gradescope["extra_data"]["assignment"]["fingerprint"]
    )


def test_another_secret_gives_other_hidden_data(fronts):
    m_a, m_b = _load(fronts["grade-a"], "measurements.json"), _load(fronts["grade-b"], "measurements.json")
    assert m_b["assignment"]["hidden_secret"] == B.fingerprint()
    assert m_a["assignment"]["fingerprint"] != m_b["assignment"]["fingerprint"], "a rotated secret misses the cache"
    facts_a, facts_b = _hidden_facts(m_a), _hidden_facts(m_b)
    differ = [
        name
        for name in facts_a
        if facts_a[name]["quality"] != facts_b[name]["quality"]
        or facts_a[name]["accuracy"] != facts_b[name]["accuracy"]
    ]
    assert differ, "the models were measured on the same rows with two secrets"
    assert _load(fronts["grade-b"], "results.json")["score"] == 100, "the reference passes with any secret"


def test_outputs_carry_the_fingerprint_never_the_secret(fronts):
    written = [p for key in ("grade-a", "grade-b", "batch") for p in fronts[key].rglob("*") if p.is_file()]
    assert written
    for secret in (A, B):
        for text in (secret.key.hex(), secret.key.hex().upper()):
            leaked = [str(p) for p in written if text.encode() in p.read_bytes()]
            assert not leaked, f"the secret is in {leaked}"
            assert text not in json.dumps(fronts["gradescope"]) and text not in fronts["gradescope_log"]
    with zipfile.ZipFile(fronts["zip"]) as zf:
        assert HiddenSecret.from_text(zf.read(SECRET_FILE).decode()) == A


READ_SECRET = """\
import json, os
seen = {}
for p in %r:
    try:
        with open(p, "rb") as f:
            seen[p] = "READ " + f.read(200).decode("ascii", "replace")
    except BaseException as e:
        seen[p] = "ERR " + type(e).__name__
with open("secret_reads.json", "w") as f:
    json.dump(seen, f)
"""


@pytest.mark.kernel
def test_a_notebook_cannot_read_the_secret(tmp_path):
    """The checkout's secret file (the default) and a named one: neither readable from the jail."""
    from autograder import hidden_secret

    named = tmp_path / "named.secret"
    named.write_text(A.text())
    default = hidden_secret.secret_path(ROOT)
    hidden_secret.ensure(default)
    paths = [str(default), str(named)]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(READ_SECRET % (paths,))])
    notebook = tmp_path / f"{ASSIGNMENT}.ipynb"
    nbformat.write(nb, notebook)
    workspace = tmp_path / "ws"
    _run(
        CLI + ["grade", notebook, "--out", tmp_path / "out", "--assignment", ASSIGNMENT, "--workspace", workspace],
        _env(named),
    )
    reads = json.loads((workspace / "secret_reads.json").read_text())
    assert set(reads) == set(paths)
    assert all(v.startswith("ERR ") for v in reads.values()), f"the kernel read: {reads}"
