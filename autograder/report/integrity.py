"""Integrity report: pairs of submissions whose student-written code overlaps, for a human to read.

Every submission re-executes in the grader, and honest students who keep ``MODEL_SEED = 0`` train
identical models: identical weights prove nothing. The signal is the code. Each notebook's code
cells are fingerprinted with copydetect (winnowing over a token stream in which comments and
whitespace are dropped and every variable, function and class name is replaced by one letter, so
renaming and reformatting change nothing; each cell is first printed back in canonical form by
``ast.unparse``, so the code shown is that form), the starter notebook's code is removed as boilerplate
(cells equal to a starter cell are dropped; the remaining starter fingerprints are ignored), and
every pair is compared.

- ``overlap share`` of a pair: the larger of the two shares of fingerprints (the part of one
  notebook's own fingerprints found in the other), so a copy padded with extra code is still
  seen. All pairs at once, from one sparse product of the notebooks × fingerprints matrix;
  copydetect's token-level comparison then gives the cells involved and the highlighted code of
  the pairs listed. Notebooks with less than ``MIN_OWN_TOKENS`` tokens of their own code are not
  compared (an untouched notebook has none): they are listed as such.
- ``THRESHOLD`` (``[integrity] threshold`` in assignment.toml replaces it) is set from data, on
  lesson 07: a second solution written separately from the reference shares at most 0.11 with
  the reference and with each of the 11 examples (independent authors); the examples, each the
  reference with one cell changed, share 0.91 to 1.0 with it and with each other, and the
  reference with every name, comment and space changed shares 1.0. 0.60 keeps 0.3 from both
  sides (tests/integrity/test_integrity_report.py measures them again).

A flag is a lead for a human, never a verdict: the report costs no execution and ``rescore``
recomputes it from the staged notebooks (``OUT/.sources``).
"""

from __future__ import annotations

import ast
import hashlib
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..cell_numbers import cell_where
from .integrity_view import highlight

NOISE_T = 25  # copydetect's defaults: k-grams of 25 tokens ...
GUARANTEE_T = 30  # ... any shared run of 30 tokens is found (window 6)
THRESHOLD = 0.60  # from data: see the module docstring
LISTED_MIN = 0.25  # pairs sharing less than this are not listed in integrity.csv
MAX_LISTED = 1000  # flagged pairs listed at most (more means the threshold does not fit the lesson)
MIN_OWN_TOKENS = 60  # less own code than this (after the starter is removed): nothing to compare
MAX_CODE_CHARS = 200_000
TOP = 10  # pairs shown with their code in summary.html
CSV_TOP = 100  # pairs written to integrity.csv (flagged ones always)


@dataclass
class Pair:
    a: str
    b: str
    share: float
    share_a: float
    share_b: float
    cells_a: list[str] = field(default_factory=list)  # "code cell 9 (cell 16 of the notebook)", as feedback says
    cells_b: list[str] = field(default_factory=list)
    snippet_a: str = ""  # HTML: the involved code with <mark> around the overlap
    snippet_b: str = ""
    flagged: bool = False
    expected: bool = False  # both are the assignment's own examples: variants of one solution


@dataclass
class IntegrityReport:
    threshold: float
    compared: int = 0  # submissions compared
    pairs_screened: int = 0  # every pair of compared notebooks
    flagged_total: int = 0  # flagged pairs, listed or not
    seconds: dict[str, float] = field(default_factory=dict)  # fingerprints, pairs
    pairs: list[Pair] = field(default_factory=list)  # best first
    too_little_code: list[str] = field(default_factory=list)  # names: too little of their own to compare
    no_own_code: list[str] = field(default_factory=list)  # names: only the starter's code (or none)
    family: list[str] = field(default_factory=list)  # names: byte for byte one of the assignment's examples
    error: str | None = None

    @property
    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if p.flagged]


# ── code of a notebook ────────────────────────────────────────────────────────────────────────


@dataclass
class _Code:
    text: str
    cells: list[tuple[int, int, str]]  # (start, end, the cell as the feedback names it) in text


def code_cells(notebook: Path) -> list[tuple[int, str]]:
    """(cell index, source) of each code cell; [] for a file that is not a notebook. Read by the
    one bounded reader (a limited child process): nothing of the notebook is parsed here."""
    from ..notebook_reader import UnreadableNotebook, load_notebook

    try:
        return [(c.index, c.source) for c in load_notebook(Path(notebook)).cells]
    except UnreadableNotebook:
        return []


def _normalise(source: str) -> str:
    """A cell's code in a canonical form: IPython magics and shell lines dropped, then parsed and
    printed back by Python itself (``ast.unparse``), so comments, blank lines, spacing, line breaks
    inside brackets and the choice of quotes leave no trace. Code that does not parse is kept as
    written, without trailing blanks."""
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    text = "\n".join(ln.rstrip() for ln in lines).strip("\n")
    try:
        return ast.unparse(ast.parse(text))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text


def _skeleton(code: str) -> str:
    """The code with every name it binds or reads replaced by ``_``: a starter cell whose
    variables were renamed is still the starter's."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            node.id = "_"
        elif isinstance(node, ast.arg):
            node.arg = "_"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.name = "_"
    return ast.unparse(tree)


def all_code_cells(paths: list[Path]) -> list[list[tuple[int, str]]]:
    """:func:`code_cells` of each path, in order, read a few at a time (each read is a child)."""
    from ..notebook_reader import read_each

    return read_each(code_cells, paths)


def own_code(notebook: Path | list[tuple[int, str]], starter_cells: set[str]) -> _Code:
    """The notebook's code cells (a path, or its :func:`code_cells`) that are not a starter cell
    verbatim, each under a comment line naming its cell (comments are not fingerprinted: it only
    serves the highlighted view)."""
    parts, cells, pos = [], [], 0
    numbered = code_cells(notebook) if isinstance(notebook, (str, Path)) else notebook
    for number, (index, source) in enumerate(numbered, start=1):
        src = _normalise(source)
        if not src or src in starter_cells or _skeleton(src) in starter_cells:
            continue
        where = cell_where(number, index)
        block = f"# ── {where} ──\n{src}\n"
        if pos + len(block) > MAX_CODE_CHARS:
            break
        parts.append(block)
        cells.append((pos, pos + len(block), where))
        pos += len(block)
    return _Code("".join(parts), cells)


# ── the report ────────────────────────────────────────────────────────────────────────────────


def integrity_report(
    notebooks: dict[str, Path],
    assignment: Any = None,
    *,
    threshold: float | None = None,
    listed_min: float = LISTED_MIN,
) -> IntegrityReport:
    """Compare every pair of ``notebooks`` (name → staged .ipynb); never raises for a student's file."""
    import copydetect

    threshold = _threshold(assignment) if threshold is None else threshold
    report = IntegrityReport(threshold=threshold)
    starter_cells, boilerplate = _starter_code(_starter(assignment))
    started = time.perf_counter()
    names, codes, prints = [], [], []
    ordered = sorted(notebooks)
    for name, cells in zip(ordered, all_code_cells([Path(notebooks[n]) for n in ordered])):
        code = own_code(cells, starter_cells)
        fp = _fingerprint(copydetect, code.text, boilerplate) if code.text else None
        if fp is None or fp.token_coverage < MIN_OWN_TOKENS:
            report.too_little_code.append(name)
            if not code.text:
                report.no_own_code.append(name)
            continue
        names.append(name)
        codes.append(code)
        prints.append(fp)
    report.compared = len(names)
    report.pairs_screened = len(names) * (len(names) - 1) // 2
    report.seconds["fingerprints"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    shares = pair_shares(prints)
    ranked = sorted(shares, key=lambda t: (-max(t[2], t[3]), names[t[0]], names[t[1]]))
    listed = [
        t
        for k, t in enumerate(ranked)
        if max(t[2], t[3]) >= listed_min and (k < CSV_TOP or (max(t[2], t[3]) >= threshold and k < MAX_LISTED))
    ]
    report.family = sorted(family_members(notebooks, assignment))
    family = set(report.family)
    expected = [names[i] in family and names[j] in family for i, j, *_ in shares]
    report.flagged_total = sum(
        1 for (*_ij, a, b), known in zip(shares, expected) if max(a, b) >= threshold and not known
    )
    for rank, (i, j, share_a, share_b) in enumerate(listed):
        known = names[i] in family and names[j] in family
        pair = Pair(
            a=names[i],
            b=names[j],
            share=round(max(share_a, share_b), 4),
            share_a=round(share_a, 4),
            share_b=round(share_b, 4),
            flagged=max(share_a, share_b) >= threshold and not known,
            expected=known,
        )
        _details(
            copydetect,
            pair,
            codes[i],
            codes[j],
            prints[i],
            prints[j],
            snippets=rank < TOP or (pair.flagged and rank < TOP + 20),
        )  # the pairs the page shows
        report.pairs.append(pair)
    report.seconds["pairs"] = round(time.perf_counter() - started, 3)
    return report


def class_integrity(notebooks: dict[str, Path], assignment: Any = None) -> IntegrityReport:
    """``integrity_report`` for a batch: a failure of the report itself is recorded (the summary
    lists it under Needs attention), never a lost batch."""
    try:
        return integrity_report(notebooks, assignment)
    except Exception as e:  # noqa: BLE001 - the grades stand without the report
        return IntegrityReport(threshold=_threshold(assignment), error=f"{type(e).__name__}: {e}"[:500])


def pair_shares(prints: list[Any]) -> list[tuple[int, int, float, float]]:
    """(i, j, share of i's fingerprints found in j, share of j's found in i) for every pair i < j
    that shares any fingerprint: one sparse product of the notebooks × fingerprints matrix."""
    from scipy import sparse

    if len(prints) < 2:
        return []
    vocab: dict[int, int] = {}
    rows, cols = [], []
    for i, fp in enumerate(prints):
        for h in fp.hashes:
            rows.append(i)
            cols.append(vocab.setdefault(int(h), len(vocab)))
    m = sparse.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(prints), len(vocab)))
    shared = sparse.triu(m @ m.T, k=1).tocoo()
    sizes = np.array([max(1, len(fp.hashes)) for fp in prints], dtype=np.float64)
    share_a, share_b = shared.data / sizes[shared.row], shared.data / sizes[shared.col]
    return list(zip(shared.row.tolist(), shared.col.tolist(), share_a.tolist(), share_b.tolist()))


def _details(
    copydetect: Any, pair: Pair, code_a: _Code, code_b: _Code, fp_a: Any, fp_b: Any, *, snippets: bool
) -> None:
    """The cells involved (and, for the pairs shown, the highlighted code) from copydetect's
    token-level comparison."""
    _overlap, _sims, (slices_a, slices_b) = copydetect.compare_files(fp_a, fp_b)
    slices_a, slices_b = _as_slices(slices_a), _as_slices(slices_b)
    pair.cells_a, pair.cells_b = _cells(code_a, slices_a), _cells(code_b, slices_b)
    if snippets:
        pair.snippet_a, pair.snippet_b = highlight(code_a.text, slices_a), highlight(code_b.text, slices_b)


def _starter_code(starter: Path | None) -> tuple[set[str], set[int]]:
    """The starter's cells (canonical and as skeletons) and every k-gram hash of its code (not
    only its winnowed ones: a student's notebook winnows other k-grams of the same code)."""
    if starter is None:
        return set(), set()
    st = starter.stat()
    return _starter_code_cached(str(starter), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=4)
def _starter_code_cached(starter: str, _mtime_ns: int, _size: int) -> tuple[set[str], set[int]]:
    from copydetect.utils import filter_code

    cells = {c for c in (_normalise(s) for _, s in code_cells(Path(starter))) if c}
    cells |= {_skeleton(c) for c in cells}
    boilerplate: set[int] = set()
    for cell in cells:
        boilerplate.update(_kgram_hashes(filter_code(cell, "code.py", "python")[0]).tolist())
    return cells, boilerplate


def _threshold(assignment: Any) -> float:
    config = getattr(assignment, "config", {}) or {}
    value = config.get("integrity", {}).get("threshold") if isinstance(config.get("integrity"), dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else THRESHOLD


def _starter(assignment: Any) -> Path | None:
    path = getattr(assignment, "notebook", None)
    return Path(path) if path is not None and Path(path).is_file() else None


@dataclass
class _Fingerprint:
    """What copydetect.compare_files reads of a CodeFingerprint."""

    raw_code: str
    filtered_code: str
    offsets: Any
    hashes: set[int]
    hash_idx: dict[int, list[int]]
    k: int
    token_coverage: float


def _kgram_hashes(filtered: str) -> Any:
    """A stable 64-bit hash of each k-gram (copydetect's uses ``hash()``, salted per process:
    the same class would give another report at every run)."""
    return np.array(
        [
            int.from_bytes(
                hashlib.blake2b(filtered[i : i + NOISE_T].encode(), digest_size=8).digest(), "little", signed=True
            )
            for i in range(len(filtered) - NOISE_T + 1)
        ],
        dtype=np.int64,
    )


def _fingerprint(copydetect: Any, text: str, boilerplate: set[int]) -> _Fingerprint:
    """copydetect's tokenising filter and winnowing, with stable hashes and without the starter's
    k-grams (removed here rather than by copydetect's ``boilerplate`` argument, whose
    ``intersect1d(..., assume_unique=True)`` misses k-grams that occur twice in a notebook)."""
    from copydetect.utils import filter_code, get_token_coverage, winnow

    filtered, offsets = filter_code(text, "code.py", "python")
    hashes = _kgram_hashes(filtered)
    hash_idx: dict[int, list[int]] = {}
    if len(hashes):
        selected, idx = winnow(hashes, GUARANTEE_T - NOISE_T + 1, remove_duplicates=False)
        for h, i in zip(selected.tolist(), idx.tolist()):
            if h not in boilerplate:
                hash_idx.setdefault(h, []).append(i)
    return _Fingerprint(
        raw_code=text,
        filtered_code=filtered,
        offsets=offsets,
        hashes=set(hash_idx),
        hash_idx=hash_idx,
        k=NOISE_T,
        token_coverage=float(get_token_coverage(hash_idx, NOISE_T, len(filtered))),
    )


def _as_slices(slices: Any) -> list[tuple[int, int]]:
    arr = np.asarray(slices)
    if arr.ndim != 2 or arr.shape[0] != 2:
        return []
    return [(int(s), int(e)) for s, e in zip(arr[0], arr[1]) if e > s]


def _cells(code: _Code, slices: list[tuple[int, int]]) -> list[str]:
    return [where for start, end, where in code.cells if any(s < end and e > start for s, e in slices)]


def family_members(notebooks: dict[str, Path], assignment: Any) -> set[str]:
    """The names that are one of the assignment's own examples (or its reference solution): the
    same name as the example's file and, byte for byte, its content. They are variants of one
    solution (``make demo`` grades them), whose pairs share code by construction and are shown
    as expected, not flagged. Both are needed: two students who hand in the same copy of an
    example, under their own names (a Gradescope export names them ``submission_…``), are flagged
    as usual, and so is any pair with a notebook outside the family."""
    from ..notebook_reader import MAX_NOTEBOOK_BYTES

    family = _family_hashes(assignment)
    out = set()
    for name, path in notebooks.items():
        if name not in family:
            continue
        try:
            path = Path(path)
            if (
                not path.is_symlink()
                and path.is_file()
                and path.stat().st_size <= MAX_NOTEBOOK_BYTES
                and hashlib.sha256(path.read_bytes()).hexdigest() == family[name]
            ):
                out.add(name)
        except OSError:
            continue
    return out


def _family_hashes(assignment: Any) -> dict[str, str]:
    """name (the file's stem) → SHA-256 of each example of the assignment and of its solution."""
    folder, reference = getattr(assignment, "folder", None), getattr(assignment, "reference_folder", None)
    candidates = sorted(Path(folder, "examples").glob("*.ipynb")) if folder is not None else []
    if reference is not None:
        candidates.append(Path(reference) / "solution.ipynb")
    out: dict[str, str] = {}
    for p in candidates:
        try:
            if p.is_file() and not p.is_symlink():
                out.setdefault(p.stem, hashlib.sha256(p.read_bytes()).hexdigest())
        except OSError:
            continue
    return out
