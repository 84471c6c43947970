"""Read files a submission wrote, without trusting them.

Every path is resolved component by component under a trusted root directory with
``O_NOFOLLOW`` (a symlink anywhere in the path is refused), the final file must be a regular
file (no FIFO, device or socket: opened with ``O_NONBLOCK`` so a FIFO cannot block us), and its
size is checked before and while reading. ``.npz`` files are read with ``allow_pickle=False``
and object arrays are refused. Every failure is an :class:`UnsafeFileError` with a message fit to
show a student.

The grader's own files (stage files, results.json, feedback, CSVs, pages, pictures) are written
with :func:`write_atomic` (:func:`write_json_atomic` for JSON; :func:`atomic_replace` when a tool
writes the file), the one place that replaces a file:
a reader sees the old file or the whole new one, never a torn one, and text is always UTF-8.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import stat
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .errors import UnsafeFileError
from .student_text import scrub_surrogates

MiB = 1024 * 1024
MAX_JSON_DEPTH = 100  # of a JSON file a submission wrote (RESULTS, the probe's report)


def _open_under(root: Path, relpath: str) -> int:
    parts = [p for p in Path(relpath).parts if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or Path(relpath).is_absolute():
        raise UnsafeFileError(f"{relpath}: not a plain path inside the working directory")
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
            except FileNotFoundError:
                raise UnsafeFileError(f"{relpath} is missing") from None
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafeFileError(f"{relpath}: '{part}' is a symlink or not a folder") from None
                raise UnsafeFileError(f"{relpath}: cannot open '{part}' ({e.strerror})") from None
            os.close(dir_fd)
            dir_fd = next_fd
        try:
            return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except FileNotFoundError:
            raise UnsafeFileError(f"{relpath} is missing") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafeFileError(f"{relpath} is a symlink, not a regular file") from None
            raise UnsafeFileError(f"{relpath}: cannot open ({e.strerror})") from None
    finally:
        os.close(dir_fd)


def read_bytes(root: Path | str, relpath: str, max_bytes: int) -> bytes:
    """The content of ``root/relpath``, a regular file of at most ``max_bytes`` bytes."""
    fd = _open_under(Path(root), relpath)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(f"{relpath} is not a regular file")
        if st.st_size > max_bytes:
            raise UnsafeFileError(f"{relpath} is {st.st_size:,} bytes, more than the {max_bytes:,} allowed")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(MiB, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise UnsafeFileError(f"{relpath} grew past the {max_bytes:,} bytes allowed")
        return b"".join(chunks)
    finally:
        os.close(fd)


def exists_regular(root: Path | str, relpath: str) -> bool:
    """True when ``relpath`` names a regular file reachable without symlinks."""
    try:
        fd = _open_under(Path(root), relpath)
    except UnsafeFileError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def load_json(root: Path | str, relpath: str, max_bytes: int = 4 * MiB) -> Any:
    """Parse a JSON file the submission wrote (plain data only: no NaN tricks are special).

    Lone surrogates (``"\\ud800"`` is valid JSON but not encodable text) are replaced by U+FFFD
    in every key and string, so that what was read can always be written again; nesting deeper
    than ``MAX_JSON_DEPTH`` is refused (every later step may then recurse safely).
    """
    data = read_bytes(root, relpath, max_bytes)
    try:
        return scrub_strings(json.loads(data.decode("utf-8")), max_depth=MAX_JSON_DEPTH)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # ValueError: also int digit limits
        raise UnsafeFileError(f"{relpath} is not valid JSON ({type(e).__name__}: {scrub(str(e))})"[:300]) from None


scrub = scrub_surrogates  # every lone surrogate replaced by U+FFFD (the rest unchanged)


def scrub_strings(value: Any, max_depth: int | None = None) -> Any:
    """``value`` (parsed JSON) with :func:`scrub` applied to every key and string, iteratively
    (a deep nesting cannot exhaust the stack); ValueError when nested deeper than ``max_depth``."""
    if isinstance(value, str):
        return scrub(value)
    if not isinstance(value, (dict, list)):
        return value
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if max_depth is not None and depth > max_depth:
            raise ValueError(f"nested more than {max_depth} deep")
        if isinstance(node, dict):
            for key in list(node):
                item = node[key]
                if isinstance(item, str):
                    node[key] = scrub(item)
                elif isinstance(item, (dict, list)):
                    stack.append((item, depth + 1))
                if isinstance(key, str) and scrub(key) != key:
                    node[scrub(key)] = node.pop(key)
        else:
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = scrub(item)
                elif isinstance(item, (dict, list)):
                    stack.append((item, depth + 1))
    return value


def load_npz(
    root: Path | str, relpath: str, max_bytes: int = 64 * MiB, max_entries: int = 10_000
) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file: numeric or bool dtypes only, never pickles."""
    data = read_bytes(root, relpath, max_bytes)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            if len(infos) > max_entries:
                raise UnsafeFileError(f"{relpath} holds {len(infos)} arrays, more than {max_entries}")
            if sum(i.file_size for i in infos) > 4 * max_bytes:
                raise UnsafeFileError(f"{relpath} unpacks to more than {4 * max_bytes:,} bytes")
        out: dict[str, np.ndarray] = {}
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            for key in npz.files:
                arr = npz[key]
                if arr.dtype.kind not in "biufc":
                    raise UnsafeFileError(f"{relpath}: array '{key}' has dtype {arr.dtype}, not a number type")
                out[key] = arr
        return out
    except UnsafeFileError:
        raise
    except Exception as e:  # noqa: BLE001 - zipfile.BadZipFile, ValueError (pickled), OSError...
        raise UnsafeFileError(
            f"{relpath} is not a valid .npz of plain arrays ({type(e).__name__}: {e})"[:300]
        ) from None


# ── writing the grader's own files ──────────────────────────────────────────────────────────


@contextmanager
def atomic_replace(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary file to fill, beside ``path``, that replaces ``path`` when the block ends well.

    The package's one place that replaces a file. The temporary file has a unique name in the
    same folder (concurrent writers never share one) and the extension of ``path`` (a tool that
    picks its format by extension still does); the block writes it (or has a tool write it); it
    is then fsynced and renamed over ``path``, so a reader sees the old file or the whole new one,
    never a torn one. If the block or the fsync fails, the temporary file is removed and ``path``
    is left as it was. A new file is 0644; a replaced one keeps its permission bits. The folder
    is created when missing.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, _mode_of(path, default=0o644))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` with :func:`atomic_replace`: the old file or the whole new one.

    ``str`` is written as UTF-8 whatever the locale, exactly as given (no newline translation; a
    lone surrogate, which UTF-8 cannot hold, becomes U+FFFD); ``bytes`` as they are.
    """
    payload = scrub(data).encode("utf-8") if isinstance(data, str) else bytes(data)
    with atomic_replace(path) as tmp, open(tmp, "wb") as f:
        f.write(payload)
    return Path(path)


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as JSON (indented, UTF-8, one final newline) to ``path`` with :func:`write_atomic`.

    Non-finite floats and numpy values are made plain first (see ``json_safe``).
    """
    return write_atomic(path, json.dumps(json_safe(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def _mode_of(path: Path, *, default: int) -> int:
    """The permission bits of an existing ``path`` (a caller may have restricted them), else ``default``."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        return default


def json_safe(value: Any) -> Any:
    """A deep copy that ``json.dumps(..., allow_nan=False)`` accepts and UTF-8 can encode: numpy
    values become numbers and lists, non-finite floats the strings "nan", "inf", "-inf" (Gradescope's
    parser rejects bare NaN), lone surrogates U+FFFD."""
    if isinstance(value, Mapping):
        return {scrub(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return json_safe(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return scrub(value)  # a lone surrogate cannot be written as UTF-8
    if value is None or isinstance(value, (int, float)):
        return value
    return scrub(str(value))
