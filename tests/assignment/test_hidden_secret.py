"""The deployment's hidden-data secret (autograder/hidden_secret.py): the one source of every
hidden input, of every assignment, in every front end.

Unit tests: the file's format and where it lives, first use, named streams (a hypothesis property
over keys and stream names), both lessons' hidden data and probe cases as a function of the
secret, the grading code's only source of randomness, the assignment fingerprint, calibration
never reading it, the repository never holding it, and the Gradescope zip carrying it. The same
secret through the real grade, batch and Gradescope run: tests/integration/test_hidden_secret_fronts.py.
"""

from __future__ import annotations

import ast
import hashlib
import json
import multiprocessing
import shutil
import subprocess
import zipfile
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder import hidden_secret
from autograder.assignment import assignment_ids, load_assignment
from autograder.errors import AssignmentError
from autograder.hidden_secret import SECRET_ENV, SECRET_FILE, HiddenSecret

ROOT = Path(__file__).resolve().parents[2]
ONE, TWO = HiddenSecret(bytes(range(32))), HiddenSecret(bytes(range(1, 33)))


@pytest.fixture
def no_deployment_secret(tmp_path, monkeypatch):
    """$AUTOGRADER_SECRET_FILE names a file that does not exist: any read of the deployment's
    secret raises instead of creating or finding one."""
    missing = tmp_path / "absent" / SECRET_FILE
    monkeypatch.setenv(SECRET_ENV, str(missing))
    return missing


# ── the file ──────────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    "text, bits",
    [
        ("00" * 16, 128),
        ("ab" * 32 + "\n", 256),
        ("  AB" + "cd" * 31 + "  \n", 256),
        ("f" * 33, 132),  # an odd number of digits: the leading nibble is 0
    ],
)
def test_a_secret_file_is_one_line_of_at_least_128_bits_of_hex(text, bits):
    secret = HiddenSecret.from_text(text)
    assert len(secret.key) * 8 >= bits >= 128
    assert HiddenSecret.from_text(secret.text()) == secret


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "one line of hex digits"),
        ("0" * 31, "holds 124 bits"),
        ("g" * 64, "one line of hex digits"),
        ("ab" * 16 + "\nab", "one line of hex digits"),
        ("0x" + "ab" * 32, "one line of hex digits"),
        ("2718", "holds 16 bits"),
    ],
)
def test_a_malformed_or_short_secret_is_refused_with_a_reason(text, message):
    with pytest.raises(AssignmentError, match=message):
        HiddenSecret.from_text(text)


def test_files_that_are_not_a_small_regular_file_are_refused(tmp_path):
    real = tmp_path / "real.secret"
    real.write_text(ONE.text())
    link = tmp_path / "link.secret"
    link.symlink_to(real)
    big = tmp_path / "big.secret"
    big.write_text("ab" * 5000)
    folder = tmp_path / "folder.secret"
    folder.mkdir()
    assert hidden_secret.load(real) == ONE
    for path, message in (
        (link, "not a regular file"),
        (folder, "not a regular file"),
        (big, "10000 bytes"),
        (tmp_path / "none", "does not exist"),
    ):
        with pytest.raises(AssignmentError, match=message):
            hidden_secret.load(path)


def test_the_secret_never_appears_in_its_repr_or_fingerprint():
    text = ONE.key.hex()
    for shown in (repr(ONE), str(ONE), ONE.fingerprint(), repr([ONE]), f"{ONE}"):
        assert text not in shown and text[:16] not in shown
    assert len(ONE.fingerprint()) == 12 and ONE.fingerprint() != TWO.fingerprint()
    assert ONE.fingerprint() == HiddenSecret(bytes(range(32))).fingerprint()


# ── where it lives, first use ─────────────────────────────────────────────────────────────────


def test_first_use_creates_one_private_secret_at_the_root_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    first = hidden_secret.deployment(tmp_path)
    path = tmp_path / SECRET_FILE
    assert path.is_file() and (path.stat().st_mode & 0o777) == 0o600
    assert len(first.key) == 32 and path.read_text() == first.text()
    assert "created a new hidden-data secret" in capsys.readouterr().err
    assert hidden_secret.deployment(tmp_path) == first
    assert capsys.readouterr().err == "", "an existing secret is read silently"
    assert [p.name for p in tmp_path.iterdir()] == [SECRET_FILE], "no temporary file is left"


def _ensure_fingerprint(path: str) -> str:
    return hidden_secret.ensure(Path(path)).fingerprint()


def test_concurrent_first_uses_agree_on_one_secret(tmp_path):
    path = str(tmp_path / SECRET_FILE)
    with multiprocessing.get_context("fork").Pool(6) as pool:
        prints = pool.map(_ensure_fingerprint, [path] * 12)
    assert len(set(prints)) == 1 and prints[0] == hidden_secret.load(Path(path)).fingerprint()


def test_without_hard_links_the_file_is_created_exclusively(tmp_path, monkeypatch):
    def no_links(*_a, **_k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(hidden_secret.os, "link", no_links)
    path = tmp_path / SECRET_FILE
    assert hidden_secret.write(path, ONE) is True and hidden_secret.load(path) == ONE
    assert hidden_secret.write(path, TWO) is False and hidden_secret.load(path) == ONE, "never overwritten"
    assert (path.stat().st_mode & 0o777) == 0o600 and [p.name for p in tmp_path.iterdir()] == [SECRET_FILE]


def test_a_named_secret_file_must_exist_and_is_never_created(no_deployment_secret):
    with pytest.raises(AssignmentError, match=f"does not exist.*{SECRET_ENV}"):
        hidden_secret.current()
    assert not no_deployment_secret.exists() and not no_deployment_secret.parent.exists()


def test_the_named_file_wins_over_the_roots(tmp_path, monkeypatch):
    named = tmp_path / "elsewhere.secret"
    named.write_text(TWO.text())
    (tmp_path / SECRET_FILE).write_text(ONE.text())
    monkeypatch.setenv(SECRET_ENV, str(named))
    assert hidden_secret.deployment(tmp_path) == TWO
    monkeypatch.delenv(SECRET_ENV)
    assert hidden_secret.deployment(tmp_path) == ONE


def test_a_rotated_file_is_read_again(tmp_path, monkeypatch):
    path = tmp_path / "rotating.secret"
    path.write_text(ONE.text())
    monkeypatch.setenv(SECRET_ENV, str(path))
    assert hidden_secret.current() == ONE
    path.write_text(TWO.text() + "\n")  # another size and mtime: another content version
    assert hidden_secret.current() == TWO


def test_using_makes_a_secret_current_in_every_thread_and_restores(no_deployment_secret):
    import threading

    seen = []
    with hidden_secret.using(ONE):
        with hidden_secret.using(TWO):
            thread = threading.Thread(target=lambda: seen.append(hidden_secret.current()))
            thread.start()
            thread.join()
        assert hidden_secret.current() == ONE
    assert seen == [TWO]
    with pytest.raises(AssignmentError):
        hidden_secret.current()
    with pytest.raises(TypeError):
        with hidden_secret.using(2718):  # type: ignore[arg-type]
            pass


# ── streams ───────────────────────────────────────────────────────────────────────────────────


def _draw(secret: HiddenSecret, stream: str) -> tuple[bytes, bytes]:
    return (
        secret.generator(stream).integers(0, 2**63, 8).tobytes(),
        secret.random_state(stream).randint(0, 2**31, 8).tobytes(),
    )


@settings(max_examples=60, deadline=None)
@given(
    key=st.binary(min_size=16, max_size=64),
    stream=st.text(min_size=1, max_size=40),
    other=st.text(min_size=1, max_size=40),
    bit=st.integers(min_value=0),
)
def test_a_stream_is_a_function_of_the_secret_and_its_name_only(key, stream, other, bit):
    secret = HiddenSecret(key)
    assert _draw(secret, stream) == _draw(HiddenSecret(bytes(key)), stream)
    flipped = bytearray(key)
    flipped[(bit // 8) % len(key)] ^= 1 << (bit % 8)
    a, b = _draw(secret, stream), _draw(HiddenSecret(bytes(flipped)), stream)
    assert a[0] != b[0] and a[1] != b[1], "one bit of the secret changes every stream"
    if other != stream:
        c = _draw(secret, other)
        assert a[0] != c[0] and a[1] != c[1], "streams of one secret are independent"


def test_short_secrets_cannot_be_made():
    with pytest.raises(AssignmentError, match="at least 128 bits"):
        HiddenSecret(b"\x00" * 15)
    with pytest.raises(ValueError):
        ONE.generator("")


# ── both lessons: hidden data and probe cases come from the secret ────────────────────────────


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _value_digest(v) -> bytes:
    """An argument's digest: a file's bytes (``Arg.file``) as they are, anything else as text."""
    return v if isinstance(v, bytes) else _digest(np.asarray(v, dtype=object).astype(str)).encode()


def _cases_digest(assignment) -> str:
    h = hashlib.sha256()
    for case in assignment.grading.probe_cases():
        h.update(case.id.encode())
        for i in range(len(case.args)):
            h.update(_value_digest(case.raw(i)))
        for k in sorted(case.kwargs):
            h.update(k.encode() + _value_digest(case.raw(k)))
    return h.hexdigest()


HIDDEN_DATA = {
    "07-quantization": lambda a: _digest(
        *(lambda s: (s.X_train, s.X_test, s.y_test, s.X_edge))(a.grading.data.hidden_split(a))
    ),
    "03-export-parity": lambda a: _digest(*(lambda h: (h.X, h.X_edge))(a.grading.data.hidden_sets())),
    "05-graph-optimization": lambda a: _digest(a.grading.data.hidden_rows()),
    "06-performance": lambda a: _digest(
        *(np.frombuffer(c.raw(0), np.uint8) for c in a.grading.probe_cases() if c.group in a.grading.profiles.GROUPS)
    ),
}


@pytest.mark.parametrize("assignment_id", sorted(HIDDEN_DATA))
def test_hidden_data_and_probe_cases_are_a_function_of_the_secret(assignment_id, no_deployment_secret):
    a = load_assignment(assignment_id, ROOT)
    public_before = _digest(*[v for v in vars(a.grading.data.public_split()).values() if isinstance(v, np.ndarray)])
    seen = {}
    for name, secret in (("one", ONE), ("one again", HiddenSecret(bytes(ONE.key))), ("two", TWO)):
        with hidden_secret.using(secret):
            seen[name] = (HIDDEN_DATA[assignment_id](a), _cases_digest(a))
    assert seen["one"] == seen["one again"], "the same secret gives the same hidden data and cases"
    assert seen["one"][0] != seen["two"][0], "another secret gives other hidden data"
    assert seen["one"][1] != seen["two"][1], "another secret gives other probe cases"
    public_after = _digest(*[v for v in vars(a.grading.data.public_split()).values() if isinstance(v, np.ndarray)])
    assert public_before == public_after, "the contract's public data does not depend on the secret"


def test_the_lessons_hidden_data_rows_name_real_lessons():
    """A row per lesson whose hidden data is worth a digest of its own; every lesson's probe cases,
    and a lesson added later, are checked by the conformance checks (autograder/authoring/conformance.py)."""
    assert set(HIDDEN_DATA) <= set(assignment_ids(ROOT))


RNG_CONSTRUCTORS = {"default_rng", "RandomState", "PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64", "SeedSequence"}


def _randomness_outside_the_secret(source: str) -> list[str]:
    """Calls that draw random numbers from something other than autograder.hidden_secret."""
    found = []
    tree = ast.parse(source)
    public = {
        id(node.func)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and not node.keywords and [ast.unparse(a) for a in node.args] == ["CONTRACT_SEED"]
    }  # np.random.default_rng(CONTRACT_SEED)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            )
            if any(n == "random" or n.startswith("numpy.random") for n in names):
                found.append(f"line {node.lineno}: imports {', '.join(names)}")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "random"
            and id(node) not in public
        ):
            found.append(f"line {node.lineno}: np.random.{node.attr}")
        if isinstance(node, ast.Name) and node.id in RNG_CONSTRUCTORS:
            found.append(f"line {node.lineno}: {node.id}")
        if isinstance(node, ast.keyword) and node.arg in ("random_state", "seed"):
            value = node.value
            if isinstance(value, ast.Constant) or (
                isinstance(value, ast.Name) and value.id.endswith("SEED") and value.id != "CONTRACT_SEED"
            ):
                found.append(f"line {node.lineno}: {node.arg}={ast.unparse(value)}")
    return found


def test_grading_code_draws_random_numbers_only_from_the_secret():
    """Every assignment's grading package: no RNG seeded from the repository (the contract's
    public data, ``CONTRACT_SEED``, is the student's too: ``random_state=CONTRACT_SEED`` or
    ``np.random.default_rng(CONTRACT_SEED)``). Type hints such as
    ``np.random.Generator`` are annotations, not draws, and are allowed."""
    problems = {}
    for path in sorted(ROOT.glob("assignments/*/grading/*.py")):
        tree_source = path.read_text()
        stripped = _strip_annotations(tree_source)
        found = _randomness_outside_the_secret(stripped)
        if found:
            problems[str(path.relative_to(ROOT))] = found
    assert not problems, f"hidden inputs drawn from something other than the secret: {problems}"


def _strip_annotations(source: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
            for arg in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                arg.annotation = None
        if isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
    return ast.unparse(tree)


def test_the_scan_finds_what_it_must():
    for bad in (
        "import numpy as np\nrng = np.random.default_rng(3141)\n",
        "from numpy.random import default_rng\n",
        "import random\n",
        "x = make_moons(random_state=2718)\n",
        "x = make_moons(random_state=HIDDEN_SEED)\n",
        "np.random.seed(5)\n",
        "x = np.random.normal(size=3)\n",
        "rng = np.random.default_rng(HIDDEN_SEED)\n",
        "rng = np.random.default_rng(CONTRACT_SEED, 1)\n",
    ):
        assert _randomness_outside_the_secret(bad), bad
    for good in (
        "rng = hidden_secret.generator(PROBE_STREAM)\n",
        "split = train_test_split(X, y, random_state=CONTRACT_SEED)\n",
        "weights = build(np.random.default_rng(CONTRACT_SEED))\n",
        "x = make_moons(random_state=secret.random_state(HIDDEN_STREAM))\n",
    ):
        assert not _randomness_outside_the_secret(good), good


# ── the assignment fingerprint: cache key and Dask check ──────────────────────────────────────


def test_a_rotated_secret_changes_the_assignment_fingerprint_not_the_code_fingerprint(
    assignment07, no_deployment_secret
):
    with hidden_secret.using(ONE):
        one = assignment07.fingerprint()
    with hidden_secret.using(TWO):
        two = assignment07.fingerprint()
    assert one != two and len(one) == len(two) == 16
    assert ONE.key.hex() not in one + two
    code = assignment07.code_fingerprint()
    with hidden_secret.using(ONE):
        assert assignment07.code_fingerprint() == code


# ── calibration never reads it ────────────────────────────────────────────────────────────────

CALIB_RUBRIC = """assignment = "cal-01"
[[checks]]
id = "c"
title = "c"
points = 1
  [[checks.parts]]
  name = "v"
  measure = "s.v"
  op = "<="
  tolerance = "c.v_max"
  points = 1
"""
CALIB_GRADING = """from autograder import hidden_secret
SEEN = []
def probe_cases():
    SEEN.append(("cases", hidden_secret.fingerprint()))
    return []
def measure(ctx):
    return {}
def calibration_samples(ctx):
    SEEN.append(("hook", hidden_secret.fingerprint()))
    return [{"s": {"v": hidden_secret.generator("cal-01/v").random()}}]
"""


def test_calibration_runs_on_fresh_secrets_and_never_reads_the_deployments(tmp_path, monkeypatch, no_deployment_secret):
    """A small fake of the pipeline (the real one runs in the slow calibrate tests) that records
    which secret is current while the reference runs; the deployment's secret file does not exist."""
    from autograder import pipeline
    from autograder.authoring import calibrate as cal

    folder = tmp_path / "assignments" / "cal-01"
    (folder / "grading").mkdir(parents=True)
    (folder / "assignment.toml").write_text('id = "cal-01"\n')
    (folder / "rubric.toml").write_text(CALIB_RUBRIC)
    (folder / "grading" / "__init__.py").write_text(CALIB_GRADING)
    (tmp_path / "reference" / "cal-01").mkdir(parents=True)
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]),
        tmp_path / "reference" / "cal-01" / "solution.ipynb",
    )
    a = load_assignment("cal-01", tmp_path)

    def fake_execute_and_measure(notebook, assignment, out, workspace, **_kw):
        assignment.grading.probe_cases()
        workspace.mkdir()
        return {"s": {"v": hidden_secret.generator("cal-01/v").random()}}

    monkeypatch.setattr(pipeline, "execute_and_measure", fake_execute_and_measure)
    path = cal.calibrate(a, runs=3, output=tmp_path / "tolerances.toml")
    seen = a.grading.SEEN
    assert [kind for kind, _ in seen] == ["cases", "hook"] * 3
    prov = __import__("tomllib").loads(path.read_text())["provenance"]
    assert prov["hidden_secrets"] == [fp for _, fp in seen], "provenance lists the secrets that were current"
    assert len(set(prov["hidden_secrets"])) == 6, "every run and every hook sample gets its own secret"
    assert prov["assignment_fingerprint"] == a.code_fingerprint()
    assert not no_deployment_secret.exists()
    with pytest.raises(AssignmentError):
        hidden_secret.current()  # nothing was left current


# ── the repository never holds it; the Gradescope zip does ────────────────────────────────────


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def test_the_repository_ignores_the_secret_and_holds_none(monkeypatch):
    if shutil.which("git") is None or _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout")
    monkeypatch.delenv(SECRET_ENV, raising=False)
    secret = hidden_secret.deployment(ROOT)  # this checkout's (created here if missing)
    path = hidden_secret.secret_path(ROOT)
    assert _git("check-ignore", "-q", str(path)).returncode == 0, f"{path.name} is not git-ignored"
    assert path.name not in _git("ls-files").stdout.split("\n")
    tracked = _git("grep", "-l", "-i", "-F", secret.key.hex()[:32], "HEAD", "--").stdout.strip()
    assert not tracked, f"committed files hold the secret: {tracked}"
    staged = _git("grep", "-l", "-i", "-F", "--cached", secret.key.hex()[:32]).stdout.strip()
    assert not staged, f"staged files hold the secret: {staged}"


def test_the_gradescope_zip_carries_the_secret_the_checkout_grades_with(tmp_path, monkeypatch):
    from autograder.gradescope.build import MANIFEST, build_zip

    named = tmp_path / "course.secret"
    named.write_text(TWO.text())
    monkeypatch.setenv(SECRET_ENV, str(named))
    report = build_zip("07-quantization", tmp_path / "a.zip", root=ROOT)
    with zipfile.ZipFile(report.zip_path) as zf:
        info = zf.getinfo(SECRET_FILE)
        assert HiddenSecret.from_text(zf.read(SECRET_FILE).decode()) == TWO
        assert (info.external_attr >> 16) & 0o777 == 0o600
        manifest = json.loads(zf.read(MANIFEST))
        others = [n for n in zf.namelist() if n != SECRET_FILE and TWO.key.hex().encode() in zf.read(n)]
    assert manifest["hidden_secret"] == TWO.fingerprint() == report.secret_fingerprint
    assert not others, f"the secret is also in {others}"
    assert (
        build_zip("07-quantization", tmp_path / "b.zip", root=ROOT).zip_path.read_bytes()
        == report.zip_path.read_bytes()
    ), "the same tree and secret build the same bytes"
    named.write_text(ONE.text() + "\n")
    rotated = build_zip("07-quantization", tmp_path / "c.zip", root=ROOT)
    assert rotated.secret_fingerprint == ONE.fingerprint(), "a rotated secret goes into the next zip"
