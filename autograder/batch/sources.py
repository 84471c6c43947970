"""Find the submissions of a batch: a folder of notebooks, or a Gradescope "Export Submissions" zip.

Both are read the same way, as a list of entries (relative path, kind, size) that are checked
before anything is read:

- a folder of ``*.ipynb``: each top-level notebook is one submission, named after its file stem;
- a Gradescope export (a zip, or the same tree unpacked into a folder): ``submission_metadata.yml``
  plus one ``submission_<id>/`` folder per submission, whose notebook is chosen by the rule
  ``gradescope run`` uses (:func:`autograder.notebook_choice.choose_notebook`: the only notebook,
  else the one named like the assignment's notebook), so a local regrade grades what Gradescope
  graded. The
  YAML has Ruby-symbol keys (``:submitters:``, ``:name:``); names, sids and emails come from it
  when it parses, and a missing or broken metadata file is a warning, never an abort.

Nothing is unpacked as is: only the chosen notebooks are read (size-capped, never following a
symlink) and written under ``staging`` with names the grader made; nothing of them is parsed here
(the bounded reader, :mod:`autograder.notebook_reader.reader`, reads them in a limited child later).
Zip entries with an absolute path, a ``..`` component or a symlink type are rejected with a
warning. Submissions that cannot be graded (no notebook, several and none named like the
assignment's, an unreadable one) are kept with a ``problem``: the batch gives them a zero with
that reason.
"""

from __future__ import annotations

import datetime
import os
import re
import stat
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

import yaml

from .. import tree_walk
from ..errors import AutograderError, UnsafeFileError
from ..notebook_choice import choose_notebook
from ..safe_files import read_bytes
from ..notebook_reader import MAX_NOTEBOOK_BYTES  # one submitted notebook: the bounded reader's cap
from ..student_text import clean

MiB = 1024 * 1024
MAX_METADATA_BYTES = 64 * MiB  # submission_metadata.yml of a whole class
MAX_ENTRIES = 200_000  # files in an export
MAX_DEPTH = 64  # nested folders looked into (an export's notebooks are 1-3 deep)
MAX_TOTAL_NOTEBOOK_BYTES = 4096 * MiB  # all notebooks staged from one source
MAX_TEXT = 200  # a submitter's name, sid or email
METADATA_NAME = "submission_metadata.yml"
_SUBMISSION_DIR = re.compile(r"^submission_[A-Za-z0-9_-]+$")
_RESERVED = {"gradebook.csv", "summary.html", "batch.json"}


class SourceError(AutograderError):
    """The batch source itself is unusable (missing, not a zip, too large)."""


@dataclass
class Submission:
    name: str  # unique and filesystem-safe: OUT/<name>/
    notebook: Path | None  # the staged notebook; None when there is none to grade
    problem: str | None = None  # why not: the zero's reason, shown to the student
    submitters: list[dict[str, str]] = field(default_factory=list)  # [{"name", "sid", "email"}]
    origin: str = ""  # where it came from, for the instructor
    submitted_at: str = ""  # when it was submitted (ISO 8601, from the export's metadata), "" unknown

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["notebook"] = str(self.notebook) if self.notebook else None
        return d


@dataclass
class Discovery:
    kind: str  # folder | gradescope_export | zip
    submissions: list[Submission]
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Entry:
    path: str  # relative, POSIX, validated
    kind: str  # file | dir | symlink | other
    size: int


# ── public ────────────────────────────────────────────────────────────────────────────────────


def discover(source: Path, staging: Path, notebook_name: str = "") -> Discovery:
    """The submissions in ``source`` (folder or zip); their notebooks are copied under ``staging``.
    ``notebook_name``: the assignment's notebook file name, which picks the notebook of an export
    folder holding several."""
    source = Path(source)
    if not source.exists():
        raise SourceError(f"{source} does not exist: give a folder of .ipynb files or a Gradescope export zip")
    staging.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        return _discover(_FolderTree(source), staging, plain_kind="folder", notebook_name=notebook_name)
    if not zipfile.is_zipfile(source):
        raise SourceError(
            f"{source} is neither a folder nor a zip file (Gradescope's 'Export Submissions' gives a zip)"
        )
    with _ZipTree(source) as tree:
        return _discover(tree, staging, plain_kind="zip", notebook_name=notebook_name)


def sanitize_name(stem: str) -> str:
    """A submission name safe as a folder name and a CSV cell: [A-Za-z0-9._-], at most 80 chars."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._-")[:80].strip("._-")
    return name if name and name.lower() not in _RESERVED else f"submission_{name}".rstrip("_")


def parse_metadata(text: str | bytes) -> dict[str, list[dict[str, str]]]:
    """``submission_<id>`` → submitters from Gradescope's ``submission_metadata.yml``.

    Ruby-symbol keys (``:name:``) lose their colon; unknown tags (``!ruby/object:…``) load as plain
    data. Raises ValueError when the file is not a mapping of submissions.
    """
    data = yaml.load(text, Loader=_TolerantLoader)  # noqa: S506 - a SafeLoader subclass
    if not isinstance(data, dict):
        raise ValueError(f"expected a mapping of submissions, found {type(data).__name__}")
    out: dict[str, list[dict[str, str]]] = {}
    for key, entry in data.items():
        folder = _plain_key(key)
        entry = {_plain_key(k): v for k, v in entry.items()} if isinstance(entry, dict) else {}
        people = entry.get("submitters")
        out[folder] = [_submitter(p) for p in people if isinstance(p, dict)] if isinstance(people, list) else []
    return out


# ── layout ────────────────────────────────────────────────────────────────────────────────────


def _discover(tree: _Tree, staging: Path, *, plain_kind: str, notebook_name: str) -> Discovery:
    entries = tree.entries()
    warnings = list(tree.warnings)
    root, meta_entry = _export_root(entries)
    folders: dict[str, list[_Entry]] = {}
    for e in entries:
        rel = _relative_to(e.path, root)
        if rel is None or not _SUBMISSION_DIR.match(rel.parts[0]) or (len(rel.parts) == 1 and e.kind != "dir"):
            continue
        files = folders.setdefault(rel.parts[0], [])  # an empty folder is a submission without a notebook
        if len(rel.parts) > 1:
            files.append(e)
    namer = _Namer()
    if not folders:
        subs = [
            _plain_submission(tree, e, namer, staging)
            for e in sorted(entries, key=lambda e: e.path)
            if _is_notebook(e) and (rel := _relative_to(e.path, root)) is not None and len(rel.parts) == 1
        ]
        return Discovery(plain_kind, subs, warnings)
    meta, times = _read_metadata(tree, meta_entry, warnings)
    subs = []
    for folder in sorted(folders, key=_natural_key):
        sub = _export_submission(tree, root, folder, folders[folder], namer, staging, notebook_name, warnings)
        sub.submitters = meta.get(folder, [])
        sub.submitted_at = times.get(folder, "")
        subs.append(sub)
    if meta and (unknown := sorted(set(meta) - set(folders))):
        warnings.append(
            f"{METADATA_NAME} lists {len(unknown)} submission(s) with no folder in the export "
            f"(e.g. {unknown[0]}); they are not in the gradebook"
        )
    return Discovery("gradescope_export", subs, warnings)


def _export_root(entries: list[_Entry]) -> tuple[str, _Entry | None]:
    metas = [
        e
        for e in entries
        if e.kind == "file" and PurePosixPath(e.path).name == METADATA_NAME and len(PurePosixPath(e.path).parts) <= 2
    ]
    if metas:
        meta = min(metas, key=lambda e: len(e.path))
        parent = PurePosixPath(meta.path).parent.as_posix()
        return ("" if parent == "." else parent), meta
    tops = {PurePosixPath(e.path).parts[0] for e in entries}
    if len(tops) == 1:
        (top,) = tops
        if any(e.path == top and e.kind == "dir" for e in entries) or all("/" in e.path for e in entries):
            return top, None
    return "", None


def _plain_submission(tree: _Tree, entry: _Entry, namer: _Namer, staging: Path) -> Submission:
    stem = PurePosixPath(entry.path).name[: -len(".ipynb")]
    name = namer.unique(sanitize_name(stem))
    return _stage(tree, entry, name, staging, origin=entry.path)


def _export_submission(
    tree: _Tree,
    root: str,
    folder: str,
    files: list[_Entry],
    namer: _Namer,
    staging: Path,
    notebook_name: str,
    warnings: list[str],
) -> Submission:
    name = namer.unique(sanitize_name(folder))
    inside = {_inside(e.path, root): e for e in files if e.kind != "dir"}
    choice = choose_notebook(((rel, e.kind == "file") for rel, e in inside.items()), notebook_name)
    if choice.chosen is None:
        return Submission(name=name, notebook=None, problem=choice.message, origin=folder)
    if choice.message:
        warnings.append(f"{folder}: {choice.message}")
    entry = inside[choice.chosen]
    return _stage(tree, entry, name, staging, origin=entry.path)


def _inside(path: str, root: str) -> str:
    """``path`` (under the export's ``root``) relative to its submission folder."""
    rel = _relative_to(path, root)
    return PurePosixPath(*rel.parts[1:]).as_posix() if rel is not None else path


def _stage(tree: _Tree, entry: _Entry, name: str, staging: Path, *, origin: str) -> Submission:
    if entry.kind == "symlink":
        return Submission(
            name,
            None,
            f"{_shown(entry)} is a symbolic link, not a notebook file; submit the file itself.",
            origin=origin,
        )
    if entry.size > MAX_NOTEBOOK_BYTES:
        return Submission(
            name,
            None,
            f"{_shown(entry)} is {entry.size:,} bytes, more than the "
            f"{MAX_NOTEBOOK_BYTES:,} allowed; clear large outputs and resubmit.",
            origin=origin,
        )
    try:
        data = tree.read(entry, MAX_NOTEBOOK_BYTES)
        tree.budget(len(data))
    except UnsafeFileError as e:
        return Submission(name, None, f"{_shown(entry)} could not be read: {e}", origin=origin)
    target = staging / f"{name}.ipynb"
    target.unlink(missing_ok=True)
    with open(target, "xb") as f:
        f.write(data)
    return Submission(name, target, origin=origin)


def _read_metadata(
    tree: _Tree, entry: _Entry | None, warnings: list[str]
) -> tuple[dict[str, list[dict[str, str]]], dict[str, str]]:
    """(submitters, submission times) by submission folder; empty, with a warning, when unreadable."""
    if entry is None:
        warnings.append(f"no {METADATA_NAME} in the export: names, sids and emails are unknown")
        return {}, {}
    try:
        text = tree.read(entry, MAX_METADATA_BYTES)
        return parse_metadata(text), parse_submission_times(text)
    except Exception as e:  # noqa: BLE001 - metadata is optional: any failure is a warning
        warnings.append(
            f"{entry.path} could not be read ({type(e).__name__}: {str(e)[:200]}); names, sids and emails are unknown"
        )
        return {}, {}


def parse_submission_times(text: str | bytes) -> dict[str, str]:
    """``submission_<id>`` → when it was submitted (``:created_at:``), as ISO 8601 with its offset;
    a submission whose time is missing or unreadable is left out."""
    data = yaml.load(text, Loader=_TolerantLoader)  # noqa: S506 - a SafeLoader subclass
    out: dict[str, str] = {}
    for key, entry in data.items() if isinstance(data, dict) else ():
        entry = {_plain_key(k): v for k, v in entry.items()} if isinstance(entry, dict) else {}
        when = iso_time(entry.get("created_at"))
        if when:
            out[_plain_key(key)] = when
    return out


def iso_time(value: Any) -> str:
    """A time as YAML or Ruby wrote it (a datetime, ``2024-03-01 10:00:00.000000000 -08:00``) as ISO
    8601 to the second; "" when it is none of those."""
    if isinstance(value, datetime.datetime):
        return value.replace(microsecond=0).isoformat()
    m = re.fullmatch(r"\s*(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:\.\d+)?\s*(Z|[+-]\d\d:?\d\d)?\s*", str(value or ""))
    if not m:
        return ""
    zone = m[3] or ""
    zone = "+00:00" if zone == "Z" else zone if ":" in zone or not zone else zone[:3] + ":" + zone[3:]
    try:
        return datetime.datetime.fromisoformat(f"{m[1]}T{m[2]}{zone}").isoformat()
    except ValueError:
        return ""


# ── trees: a folder or a zip as a checked list of entries ───────────────────────────────────


class _Tree:
    warnings: list[str]

    def __init__(self) -> None:
        self.warnings = []
        self._staged = 0

    def entries(self) -> list[_Entry]:
        raise NotImplementedError

    def read(self, entry: _Entry, max_bytes: int) -> bytes:
        raise NotImplementedError

    def budget(self, n: int) -> None:
        self._staged += n
        if self._staged > MAX_TOTAL_NOTEBOOK_BYTES:
            raise SourceError(f"the notebooks of this source add up to more than {MAX_TOTAL_NOTEBOOK_BYTES:,} bytes")


class _FolderTree(_Tree):
    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def entries(self) -> list[_Entry]:
        out: list[_Entry] = []
        for rel, st in self._walk():
            kind = (
                "symlink"
                if stat.S_ISLNK(st.st_mode)
                else "dir"
                if stat.S_ISDIR(st.st_mode)
                else "file"
                if stat.S_ISREG(st.st_mode)
                else "other"
            )
            out.append(_Entry(rel, kind, st.st_size if kind == "file" else 0))
            if len(out) > MAX_ENTRIES:
                raise SourceError(f"{self.root} holds more than {MAX_ENTRIES:,} files")
        return out

    def _walk(self) -> Iterator[tuple[str, os.stat_result]]:
        """Every entry (folders too), as any tree students wrote is walked (:mod:`autograder.tree_walk`:
        iterative, no link followed); folders nested past MAX_DEPTH are left out, not descended."""
        top_level_only = not _looks_like_export(self.root)
        top = tree_walk.open_folder(self.root)
        try:
            for e in tree_walk.walk(
                top,
                what=str(self.root),
                max_entries=MAX_ENTRIES + 1,
                include=lambda e: e.depth <= (1 if top_level_only else MAX_DEPTH),
            ):
                if not e.leaving:
                    yield e.path, e.st
        except tree_walk.TreeLimitError as e:
            raise SourceError(f"{self.root} holds more than {MAX_ENTRIES:,} files") from e
        finally:
            os.close(top)

    def read(self, entry: _Entry, max_bytes: int) -> bytes:
        return read_bytes(self.root, entry.path, max_bytes)


class _ZipTree(_Tree):
    def __init__(self, path: Path) -> None:
        super().__init__()
        try:
            self.zf = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as e:
            raise SourceError(f"{path} is not a readable zip file ({e})") from None
        self._infos: dict[str, zipfile.ZipInfo] = {}

    def __enter__(self) -> _ZipTree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.zf.close()

    def entries(self) -> list[_Entry]:
        infos = self.zf.infolist()
        if len(infos) > MAX_ENTRIES:
            raise SourceError(f"the zip holds {len(infos):,} entries, more than {MAX_ENTRIES:,}")
        out: list[_Entry] = []
        for info in infos:
            path, why = check_zip_name(info)
            if why:
                self.warnings.append(f"zip entry {info.filename[:200]!r} rejected: {why}")
                continue
            if path in self._infos:
                self.warnings.append(f"zip entry {path!r} rejected: a second entry with the same path")
                continue
            mode = info.external_attr >> 16
            kind = (
                "symlink"
                if stat.S_ISLNK(mode)
                else "dir"
                if info.is_dir()
                else "other"
                if stat.S_IFMT(mode) not in (0, stat.S_IFREG)
                else "file"
            )
            if kind == "symlink":
                self.warnings.append(f"zip entry {path!r} rejected: a symbolic link")
            self._infos[path] = info
            out.append(_Entry(path, kind, info.file_size))
        return out

    def read(self, entry: _Entry, max_bytes: int) -> bytes:
        info = self._infos[entry.path]
        try:
            with self.zf.open(info) as f:
                data = f.read(max_bytes + 1)
        except (zipfile.BadZipFile, RuntimeError, OSError, EOFError, NotImplementedError) as e:
            raise UnsafeFileError(f"the zip entry is damaged or encrypted ({type(e).__name__})") from None
        if len(data) > max_bytes:
            raise UnsafeFileError(f"it unpacks to more than {max_bytes:,} bytes")
        return data


def check_zip_name(info: zipfile.ZipInfo) -> tuple[str, str | None]:
    """(normalised path, None) for a safe member name, or (name, why it is rejected)."""
    raw = info.filename
    name = raw.replace("\\", "/")
    if not name or "\x00" in name:
        return raw, "an empty name or a NUL byte in it"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return raw, "an absolute path"
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        return raw, "a '..' component that leaves the archive"
    if not parts:
        return raw, "an empty path"
    return "/".join(parts), None


# ── small helpers ───────────────────────────────────────────────────────────────────────────


class _Namer:
    def __init__(self) -> None:
        self.used: set[str] = set()

    def unique(self, name: str) -> str:
        candidate, n = name, 1
        while candidate.lower() in self.used:
            n += 1
            candidate = f"{name}-{n}"
        self.used.add(candidate.lower())
        return candidate


def _looks_like_export(root: Path) -> bool:
    """A Gradescope export unpacked here or in a subfolder (only then is the tree walked)."""
    children = [p for p in root.iterdir() if not p.is_symlink()]
    if (root / METADATA_NAME).is_file() or any(_SUBMISSION_DIR.match(p.name) and p.is_dir() for p in children):
        return True
    return any(p.is_dir() and (p / METADATA_NAME).is_file() for p in children)


def _is_notebook(e: _Entry) -> bool:
    parts = PurePosixPath(e.path).parts
    return (
        e.kind in ("file", "symlink")
        and e.path.lower().endswith(".ipynb")
        and not any(p.startswith(".") or p == "__MACOSX" for p in parts)
    )


def _relative_to(path: str, root: str) -> PurePosixPath | None:
    p = PurePosixPath(path)
    if not root:
        return p
    try:
        rel = p.relative_to(root)
    except ValueError:
        return None
    return rel if rel.parts else None


def _natural_key(s: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def _shown(e: _Entry) -> str:
    """A student-chosen file name, fit for a message: no control characters, at most 80 chars."""
    return _clean(PurePosixPath(e.path).name)[:80]


def _plain_key(key: Any) -> str:
    return str(key).strip().lstrip(":")


def _clean(value: Any) -> str:
    return "" if value is None else clean(value, MAX_TEXT)


def _submitter(person: dict[Any, Any]) -> dict[str, str]:
    p = {_plain_key(k): v for k, v in person.items()}
    return {k: _clean(p.get(k)) for k in ("name", "sid", "email")}


class _TolerantLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """yaml's safe loader that loads unknown (Ruby) tags as plain mappings, lists or strings."""


def _construct_untagged(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_TolerantLoader.add_constructor(None, _construct_untagged)
