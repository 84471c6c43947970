"""Shared fixtures (the project root, the assignment, the Gradescope results schema), the rule
that marks each test with what it needs (tests/needs.py), strict skips in CI
(tests/strict_skips.py) and the guard of ``make test-fast`` (no jail, no kernel)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import strict_skips
import needs
from needs import NO_JAIL_ENV, guard_no_jail, mark_by_fixtures

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "autograder" / "schemas" / "gradescope_results.schema.json"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "kernel_template: an adversarial test's run with AUTOGRADER_KERNEL_TEMPLATE=1 (tests/adversarial/conftest.py)",
    )
    config.addinivalue_line("markers", "xdist_group: the tests of one group run on one xdist worker (tests/needs.py)")
    strict_skips.register(config)
    if os.environ.get(NO_JAIL_ENV) == "1":
        guard_no_jail()


def pytest_collection_modifyitems(config, items):
    """Mark each test with what its fixtures need (tests/needs.py); skip root tests when not root."""
    mark_by_fixtures(items, as_root=os.geteuid() == 0)


def _no_jail_started(phase: str):
    """Under ``make test-fast`` (tests/needs.py's guard), a test whose setup or call started a jail,
    a kernel or a template fails, even where the grader turned the refusal into a grade."""
    before = len(needs.STARTED)
    result = yield  # an exception of the test's (the refusal, say) goes on as it is
    started = needs.STARTED[before:]
    if started:
        pytest.fail(f"{phase} started under {NO_JAIL_ENV}=1 (make test-fast) without the kernel marker: {started}")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _no_jail_started("the setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _no_jail_started("the test"))


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session", autouse=True)
def one_hidden_data_secret():
    """The whole suite, its subprocesses and every fake project root grade with this checkout's
    hidden-data secret (created on first use): the same in every xdist worker and run, so cached
    images of the Gradescope zip stay valid, and no fake root prints a note of its own.
    tests/assignment/test_hidden_secret.py tests the other ways of finding it."""
    import os

    from autograder import hidden_secret

    if os.environ.get(hidden_secret.SECRET_ENV):
        yield
        return
    import tempfile

    from autograder.errors import AssignmentError

    path, spare = hidden_secret.secret_path(ROOT), None
    try:
        hidden_secret.deployment(ROOT)
    except AssignmentError:  # a read-only checkout without one (e.g. bound into a container)
        spare = tempfile.mkdtemp(prefix="autograder-test-secret-")
        path = Path(spare) / hidden_secret.SECRET_FILE
        hidden_secret.ensure(path)
    os.environ[hidden_secret.SECRET_ENV] = str(path)
    try:
        yield
    finally:
        os.environ.pop(hidden_secret.SECRET_ENV, None)
        if spare:
            import shutil

            shutil.rmtree(spare, ignore_errors=True)


@pytest.fixture(scope="session")
def lessons(tmp_path_factory):
    """``lessons(root, id)`` → the one ``conformancekit.Lesson`` of that root and id in this
    session: its examples are graded once per pytest run, as one batch, the first time a test reads
    them (such a test carries the ``kernel`` and ``slow`` markers itself), and every xdist worker
    reads that batch (:class:`SharedLesson`). The conformance suite and the lessons' own end-to-end
    tests share it."""
    made: dict = {}
    shared = run_folder(tmp_path_factory)
    SharedLesson = _shared_lesson_class()  # conformancekit imports the grader: only once a test asks

    def get(root: Path, lesson_id: str):
        key = (Path(root).resolve(), lesson_id)
        if key not in made:
            made[key] = SharedLesson(
                key[0], lesson_id, tmp_path_factory.mktemp(f"lesson-{lesson_id}"), shared=shared / "lessons"
            )
        return made[key]

    return get


def run_folder(tmp_path_factory) -> Path:
    """The folder every xdist worker of this pytest run shares (the run's base temporary folder,
    which holds each worker's own), or this session's own without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def lesson_digest(root: Path, lesson_id: str) -> str:
    """What a lesson's graded examples depend on: its notebooks, its files and reference files, the
    grader's source, the hidden-data secret, the jail's switches, and the root they are graded in."""
    import hashlib

    from autograder import hidden_secret

    h = hashlib.sha256(f"{root}\0{lesson_id}\0".encode())
    for name in sorted(k for k in os.environ if k.startswith("AUTOGRADER_")):
        h.update(f"{name}={os.environ[name]}\0".encode())
    secret = os.environ.get(hidden_secret.SECRET_ENV)
    folders = [root / "assignments" / lesson_id, root / "reference" / lesson_id, ROOT / "autograder"]
    files = [Path(secret)] if secret and Path(secret).is_file() else []
    for folder in folders:
        files += sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        h.update(f"{path}\0".encode() + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def _shared_lesson_class():
    from dataclasses import dataclass

    from conformancekit import Graded, Lesson

    @dataclass
    class SharedLesson(Lesson):
        """A :class:`conformancekit.Lesson` whose batch every xdist worker of the run shares: the first
        worker to read the grades runs it (holding a lock) in ``shared/<id>-<digest>``, the others
        wait for it and read its files; ``workdir/batch`` links to it. A failed batch leaves no
        result: the next reader grades again."""

        shared: Path | None = None

        @property
        def graded(self) -> dict:
            if self._graded is None:
                import fcntl

                folder = self.shared / f"{self.id}-{lesson_digest(self.root, self.id)}"
                folder.mkdir(parents=True, exist_ok=True)
                names = folder / "names.json"
                with open(folder / ".lock", "w") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
                    if not names.is_file():
                        graded = Lesson(self.root, self.id, folder).graded  # into folder/batch
                        rows = {name: g.row for name, g in graded.items()}
                        (folder / "names.json.part").write_text(json.dumps(rows, default=str))
                        (folder / "names.json.part").rename(names)
                rows = json.loads(names.read_text())
                batch = self.workdir / "batch"
                if not batch.exists():
                    batch.symlink_to(folder / "batch", target_is_directory=True)
                self._graded = {}
                for name, row in rows.items():
                    read = lambda file, name=name: (
                        json.loads(p.read_text()) if (p := batch / Path(name).stem / file).is_file() else {}
                    )
                    self._graded[name] = Graded(
                        row, read("grade.json"), read("results.json"), read("measurements.json"), read("execution.json")
                    )
            return self._graded

    return SharedLesson


@pytest.fixture(scope="session")
def assignment07():
    from autograder.assignment import load_assignment

    return load_assignment("07-quantization", root=ROOT)


@pytest.fixture(scope="session")
def results_validator():
    """A callable that validates a results.json dict against Gradescope's documented format."""
    import jsonschema

    schema = json.loads(SCHEMA_PATH.read_text())
    validator = jsonschema.Draft202012Validator(schema)

    def validate(results: dict) -> None:
        errors = sorted(validator.iter_errors(results), key=lambda e: list(e.path))
        assert not errors, "results.json violates Gradescope's format:\n" + "\n".join(
            f"- {'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors[:10]
        )

    return validate
