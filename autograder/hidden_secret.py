"""The deployment's hidden-data secret: every hidden input of every assignment comes from it.

Hidden test sets and the probe's seeded cases used to come from seeds written in the repository,
and one leaked hidden value was enough to find the seed by brute force and regenerate every hidden
row. They now come from a secret of 256 random bits that belongs to the deployment, never to the
repository (SECURITY.md, "Hidden data"):

- **Where it is.** The file ``$AUTOGRADER_SECRET_FILE`` when that variable is set (it must
  exist), else :data:`SECRET_FILE` at the project root (``$AUTOGRADER_ROOT`` or the checkout:
  git-ignored there; on Gradescope the root of the unpacked zip, where ``gradescope build`` writes
  the instructor's secret). When neither exists, the default file is created on first use with a
  fresh secret, and a note on stderr says so: a checkout grades reproducibly without any setup.
- **What it is.** At least 128 bits as hex digits on one line (a generated one has 256). Read
  once per content version; an unreadable or malformed file is an :class:`AssignmentError`.
- **How data comes from it.** A named stream per use (``"<assignment id>/hidden-split"``):
  HMAC-SHA256 of the stream's name under the secret seeds a 256-bit ``SeedSequence``, which
  drives a ``Generator(PCG64)`` (:meth:`HiddenSecret.generator`) or, where a recipe needs the
  legacy interface (scikit-learn's ``random_state``), a ``RandomState(MT19937)``
  (:meth:`HiddenSecret.random_state`). Streams are independent: knowing one says nothing of
  another, nor of the secret.
- **Per submission.** What a student's functions receive (probe cases, lesson 05's model files,
  lesson 03's probed rows) comes from a *submission stream*: the same name keyed by the secret
  AND the submission's key (:func:`submission_key`, a hash of the notebook's code cells), so one
  student's leaked cases are nothing to another, and a regrade of the same code draws the same
  cases. The pipeline makes the key current for the whole grade (:func:`submission`); grading
  code asks for :func:`submission_generator` (or :func:`submission_random_state`) and never sees
  the key. The grader's own data (a test set it scores models on) stays a deployment stream
  (:func:`generator`). Outside a grade (tests, a tool that counts cases) the key is
  :data:`NO_SUBMISSION`.
- **What is recorded.** Only :meth:`HiddenSecret.fingerprint`, a 12-hex-digit hash: in
  measurements.json and results.json (``assignment.hidden_secret``) and in the assignment's
  fingerprint, so the batch cache and the Dask workers' check tell secrets apart.
- **Calibration** never reads it: ``calibrate`` draws fresh secrets and a fresh submission key
  per run and makes each current while the reference runs, so tolerances hold for any secret
  and any submission's draw.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from .errors import AssignmentError
from .project import project_root

if TYPE_CHECKING:  # numpy is imported when data is generated, not when the module is
    import numpy as np

SECRET_FILE = "hidden-data.secret"
SECRET_ENV = "AUTOGRADER_SECRET_FILE"
MIN_BITS = 128
GENERATED_BYTES = 32  # 256 bits
MAX_FILE_BYTES = 4096
POOL_WORDS = 8  # SeedSequence pool of 8 × 32 bits: all 256 bits of a stream's seed
_HEX = re.compile(r"[0-9a-fA-F]+")
_FINGERPRINT_LABEL = b"autograder hidden-data secret fingerprint\x00"
_SUBMISSION_LABEL = b"autograder submission key\x00"
# a submission stream's HMAC message starts with a byte no UTF-8 text holds: never a deployment stream's
_SUBMISSION_PREFIX = b"\xff"
SUBMISSION_KEY_HEX = 32  # 128 bits of sha256
NO_SUBMISSION = "no-submission"  # the key in effect outside a grade: tests, tools that count cases
# how hidden inputs are drawn (part of the assignment's fingerprint: a batch cache made under
# another scheme re-executes instead of serving draws made another way)
DRAWS = "per-submission-1"


@dataclass(frozen=True)
class HiddenSecret:
    """A secret's bytes (never printed: its repr shows the fingerprint) and the streams it seeds."""

    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.key) * 8 < MIN_BITS:
            raise AssignmentError(f"a hidden-data secret needs at least {MIN_BITS} bits, got {len(self.key) * 8}")

    def __repr__(self) -> str:
        return f"HiddenSecret(fingerprint={self.fingerprint()!r})"

    @classmethod
    def generate(cls) -> "HiddenSecret":
        """A fresh secret of 256 bits from the operating system's CSPRNG."""
        return cls(secrets.token_bytes(GENERATED_BYTES))

    @classmethod
    def from_text(cls, text: str, where: str = "the secret") -> "HiddenSecret":
        """Parse a file's content: hex digits on one line (surrounding whitespace ignored)."""
        digits = text.strip()
        if not _HEX.fullmatch(digits or "-"):
            raise AssignmentError(
                f"{where} must hold one line of hex digits (e.g. 64 of them, as "
                f"`autograder gradescope build` writes), found something else"
            )
        if len(digits) * 4 < MIN_BITS:
            raise AssignmentError(
                f"{where} holds {len(digits) * 4} bits; a hidden-data secret needs at "
                f"least {MIN_BITS} ({MIN_BITS // 4} hex digits)"
            )
        return cls(bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits))

    def text(self) -> str:
        """The file content for this secret."""
        return self.key.hex() + "\n"

    def fingerprint(self) -> str:
        """12 hex digits of a keyed hash: names the secret in records, reveals nothing of it."""
        return hashlib.sha256(_FINGERPRINT_LABEL + self.key).hexdigest()[:12]

    def seed_sequence(self, stream: str, submission: str | None = None) -> "np.random.SeedSequence":
        """The ``SeedSequence`` of one named stream: HMAC-SHA256(secret, message) as its entropy.

        The message is the stream's name (a deployment stream), or, with ``submission`` (a
        submission stream), ``0xff``, the name's length (8 bytes) and the name, then the key:
        no deployment stream's message starts with ``0xff`` (not UTF-8), and the length makes
        each (name, key) pair one message."""
        import numpy as np

        if not stream:
            raise ValueError("a hidden-data stream needs a name")
        name = stream.encode("utf-8")
        if submission is None:
            message = name
        else:
            if not isinstance(submission, str) or not submission:
                raise ValueError("a submission stream needs a submission key")
            message = _SUBMISSION_PREFIX + len(name).to_bytes(8, "big") + name + submission.encode("utf-8")
        digest = hmac.new(self.key, message, hashlib.sha256).digest()
        return np.random.SeedSequence(int.from_bytes(digest, "big"), pool_size=POOL_WORDS)

    def generator(self, stream: str, submission: str | None = None) -> "np.random.Generator":
        """``Generator(PCG64(...))`` of a named stream (of ``submission``'s, when given): the same
        secret, name and key, the same numbers."""
        import numpy as np

        return np.random.Generator(np.random.PCG64(self.seed_sequence(stream, submission)))

    def random_state(self, stream: str, submission: str | None = None) -> "np.random.RandomState":
        """``RandomState(MT19937(...))`` of a named stream, for recipes that take ``random_state``."""
        import numpy as np

        return np.random.RandomState(np.random.MT19937(self.seed_sequence(stream, submission)))


# ── where the deployment's secret lives ───────────────────────────────────────────────────────


def secret_path(root: Path | None = None) -> Path:
    """``$AUTOGRADER_SECRET_FILE`` when set, else :data:`SECRET_FILE` at ``root`` (the project root)."""
    env = os.environ.get(SECRET_ENV)
    if env:
        return Path(env)
    return Path(root if root is not None else project_root()) / SECRET_FILE


def load(path: Path) -> HiddenSecret:
    """The secret in ``path`` (a regular file, not a link); :class:`AssignmentError` when it cannot be read."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        raise AssignmentError(
            f"the hidden-data secret {path} does not exist"
            + (f" (${SECRET_ENV} names it)" if os.environ.get(SECRET_ENV) else "")
        ) from None
    except OSError as e:
        raise AssignmentError(f"cannot read the hidden-data secret {path}: {e.strerror}") from None
    return _load(str(path), st.st_mtime_ns, st.st_size, st.st_mode)


@lru_cache(maxsize=8)
def _load(path: str, _mtime_ns: int, size: int, mode: int) -> HiddenSecret:
    if not stat.S_ISREG(mode):
        raise AssignmentError(f"the hidden-data secret {path} is not a regular file")
    if size > MAX_FILE_BYTES:
        raise AssignmentError(f"the hidden-data secret {path} is {size} bytes; it is one line of hex digits")
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise AssignmentError(f"cannot read the hidden-data secret {path}: {e.strerror}") from None
    return HiddenSecret.from_text(text, f"the hidden-data secret {path}")


def write(path: Path, secret: HiddenSecret) -> bool:
    """Write ``secret`` to ``path`` (mode 0600) unless a file is already there; True when written.

    Created under a temporary name and linked into place, so concurrent first uses (a batch's
    workers, parallel tests) agree on one secret and nobody reads a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secret.text())
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: create it exclusively
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secret.text())
        return True
    finally:
        tmp.unlink(missing_ok=True)


def ensure(path: Path) -> HiddenSecret:
    """The secret at ``path``, created there (with a note on stderr) when no file exists yet."""
    path = Path(path)
    if not os.path.lexists(path):
        try:
            created = write(path, HiddenSecret.generate())
        except OSError as e:
            raise AssignmentError(
                f"no hidden-data secret at {path}, and one cannot be created there: "
                f"{e.strerror}; set ${SECRET_ENV} to a secret file"
            ) from None
        if created:
            print(
                f"note: created a new hidden-data secret in {path} (256 random bits, never committed; "
                f'the hidden test data comes from it: see SECURITY.md, "Hidden data")',
                file=sys.stderr,
            )
    return load(path)


# ── the secret in effect ──────────────────────────────────────────────────────────────────────

_override: list[HiddenSecret] = []


def deployment(root: Path | None = None) -> HiddenSecret:
    """The deployment's secret: ``$AUTOGRADER_SECRET_FILE`` (which must exist), else the file at
    ``root`` (the project root by default), created on first use."""
    if os.environ.get(SECRET_ENV):
        return load(secret_path())
    return ensure(secret_path(root))


def current() -> HiddenSecret:
    """The secret hidden data comes from now: one made current by :func:`using`, else the
    deployment's (:func:`deployment`)."""
    if _override:
        return _override[-1]
    return deployment()


@contextmanager
def using(secret: HiddenSecret) -> Iterator[HiddenSecret]:
    """Make ``secret`` current in this process (every thread) until the block ends: how
    ``calibrate`` measures the reference on secrets of its own, and tests on chosen ones."""
    if not isinstance(secret, HiddenSecret):
        raise TypeError(f"using() takes a HiddenSecret, not {type(secret).__name__}")
    _override.append(secret)
    try:
        yield secret
    finally:
        _override.remove(secret)


def generator(stream: str) -> "np.random.Generator":
    """``current().generator(stream)``: what an assignment's grading code calls for hidden data."""
    return current().generator(stream)


def random_state(stream: str) -> "np.random.RandomState":
    """``current().random_state(stream)``, for recipes that take scikit-learn's ``random_state``."""
    return current().random_state(stream)


def fingerprint() -> str:
    """The fingerprint of the secret in effect (what records carry instead of the secret)."""
    return current().fingerprint()


# ── the submission in effect: what a student's functions receive is drawn per submission ─────

_submissions: list[str] = []


def submission_key(code_cells: Iterable[str]) -> str:
    """A submission's key: 32 hex digits of sha256 over its code cells' sources, in order, each
    with its length. The code that runs, not the file: a notebook saved again, run again (new
    outputs, execution counts, metadata) or stripped of its outputs keeps its key, hence its
    cases and its grade; any change to the code draws other cases."""
    h = hashlib.sha256(_SUBMISSION_LABEL)
    for source in code_cells:
        data = source.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:SUBMISSION_KEY_HEX]


def notebook_submission_key(notebook: Path) -> str:
    """:func:`submission_key` of the notebook file ``notebook``, its code cells read by the one
    reader of submitted notebooks (a limited child process: no byte of it is parsed here). A
    notebook that cannot be read runs no cell and receives no case: it gets the key of no cell."""
    from .notebook_reader import UnreadableNotebook, load_notebook

    try:
        cells = load_notebook(Path(notebook)).cells
    except UnreadableNotebook:
        cells = []
    return submission_key(c.source for c in cells)


def current_submission() -> str:
    """The key made current by :func:`submission` (the grade in progress), else :data:`NO_SUBMISSION`."""
    return _submissions[-1] if _submissions else NO_SUBMISSION


@contextmanager
def submission(key: str) -> Iterator[str]:
    """Make ``key`` the submission in effect in this process (every thread) until the block ends:
    the pipeline holds it for a whole grade, so the cases it sends, the warm-ups beside the
    kernel and the measurements after it all draw the same submission's inputs."""
    if not isinstance(key, str) or not key:
        raise TypeError("submission() takes a non-empty key (submission_key of the notebook)")
    _submissions.append(key)
    try:
        yield key
    finally:
        _submissions.remove(key)


def submission_generator(stream: str) -> "np.random.Generator":
    """``current().generator(stream, current_submission())``: what grading code calls for the
    inputs a student's functions receive (probe cases, files, rows handed to them)."""
    return current().generator(stream, current_submission())


def submission_random_state(stream: str) -> "np.random.RandomState":
    """:func:`submission_generator`'s ``RandomState``, for recipes that take ``random_state``."""
    return current().random_state(stream, current_submission())
