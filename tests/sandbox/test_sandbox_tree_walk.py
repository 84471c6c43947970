"""The one walker of student trees (``autograder/tree_walk.py``), by properties over
generated directory shapes: deep, wide, names in any script (and bytes that are no UTF-8),
symlinks pointing out, FIFOs, names that vanish or change type between the listing and their use,
and a thread churning the tree while it is walked.

Invariants: the copy is an inert replica (a link is copied as its text, never followed; nothing
outside changes) or stops with the graded reason (:class:`TreeLimitError`) exactly when the tree
is past a limit; the size accounting counts every entry; clean-up leaves nothing at any depth,
with few descriptors; nothing raises but the graded reason.
"""

from __future__ import annotations

import os
import resource
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder import tree_walk
from autograder.jail.disk_watchdog import remove_owned
from autograder.sandbox.workspace import copy_tree_safely

CANARY = b"outside the tree: never copied, never changed"
# A bounded run in `make test`; AUTOGRADER_FUZZ_EXAMPLES=500 for a longer one (nightly, by hand).
EXAMPLES = int(os.environ.get("AUTOGRADER_FUZZ_EXAMPLES", "15"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


# ------------------------------------------------------------------ shapes
@dataclass(frozen=True)
class File:
    data: bytes


@dataclass(frozen=True)
class Link:
    target: str  # "OUT" is replaced by the outside folder's path


@dataclass(frozen=True)
class Fifo:
    pass


@dataclass(frozen=True)
class Dir:
    entries: dict = field(default_factory=dict)


def _ok_name(raw: bytes) -> bool:
    return 0 < len(raw) <= 255 and b"/" not in raw and b"\0" not in raw and raw not in (b".", b"..")


NAMES = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="/\0"), min_size=1, max_size=12).filter(
        lambda n: _ok_name(n.encode())
    ),
    st.binary(min_size=1, max_size=12).filter(_ok_name).map(os.fsdecode),  # not UTF-8
)
LEAVES = st.one_of(
    st.binary(max_size=300).map(File),
    st.sampled_from(["OUT", "OUT/canary", "../../..", "/etc/hostname", "dangling", "."]).map(Link),
    st.just(Fifo()),
    st.just(Dir()),
)
TREES = st.recursive(LEAVES, lambda kids: st.dictionaries(NAMES, kids, max_size=6).map(Dir), max_leaves=30)
SHAPES = st.tuples(
    st.dictionaries(NAMES, TREES, max_size=8).map(Dir), st.sampled_from([0, 1, 3, 255, 256, 257, 300])
)  # a chain of nested folders


def _build(fd: int, node: Dir, outside: Path) -> None:
    for name, child in node.entries.items():
        if isinstance(child, File):
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640, dir_fd=fd)
            os.write(out, child.data)
            os.close(out)
        elif isinstance(child, Link):
            os.symlink(child.target.replace("OUT", str(outside)), name, dir_fd=fd)
        elif isinstance(child, Fifo):
            os.mkfifo(name, 0o600, dir_fd=fd)
        else:
            os.mkdir(name, 0o750, dir_fd=fd)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            try:
                _build(sub, child, outside)
            finally:
                os.close(sub)


def _chain(fd: int, depth: int, name: str = "\u0434") -> None:
    """``depth`` nested folders under ``fd``, a file at the bottom."""
    fd = os.dup(fd)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


def _stats(node: Dir, depth: int = 0) -> tuple[int, int]:
    """(entries, depth of the deepest folder) of a shape."""
    entries, deepest = 0, depth
    for child in node.entries.values():
        entries += 1
        if isinstance(child, Dir):
            n, d = _stats(child, depth + 1)
            entries, deepest = entries + n, max(deepest, d)
    return entries, deepest


def _describe(root: Path) -> dict[str, tuple]:
    """The tree as the OS shows it (os.walk: an implementation independent of the walker)."""
    seen: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st_ = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISREG(st_.st_mode):
                seen[rel] = ("file", Path(p).read_bytes(), stat.S_IMODE(st_.st_mode))
            elif stat.S_ISLNK(st_.st_mode):
                seen[rel] = ("link", os.readlink(p))
            elif stat.S_ISFIFO(st_.st_mode):
                seen[rel] = ("fifo",)
            else:
                seen[rel] = ("dir", stat.S_IMODE(st_.st_mode))
    return seen


@pytest.fixture
def place():
    base = Path(tempfile.mkdtemp(prefix="tree-walk-"))
    outside = base / "outside"
    outside.mkdir()
    (outside / "canary").write_bytes(CANARY)
    yield base, outside
    tree_walk.remove_tree(base)


def _outside_intact(outside: Path) -> None:
    assert sorted(os.listdir(outside)) == ["canary"] and (outside / "canary").read_bytes() == CANARY


# ------------------------------------------------------------------ properties
@SETTINGS
@given(shape=SHAPES, cap=st.sampled_from([5, 40, tree_walk.MAX_ENTRIES]))
def test_copy_is_an_inert_replica_or_the_graded_reason(place, shape, cap):
    base, outside = place
    node, chain = shape
    src, dest = base / "src", base / "dest"
    for d in (src, dest):
        tree_walk.remove_tree(d)
        d.mkdir()
    top = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _build(top, node, outside)
        _chain(top, chain)
    finally:
        os.close(top)
    entries, deepest = _stats(node)
    entries += chain + 1
    deepest = max(deepest, chain)
    too_deep, too_many = deepest > tree_walk.MAX_DEPTH, entries > cap
    try:
        copy_tree_safely(src, dest, max_entries=cap)
    except tree_walk.TreeLimitError as e:
        assert too_deep or too_many, f"refused a tree within the limits: {e}"
        assert e.kind in (["depth"] if too_deep else []) + (["entries"] if too_many else []), e
        assert e.sentence in (
            "the working directory is nested deeper than 256 folders",
            f"the working directory holds more than {cap:,} files and folders",
        )
    else:
        assert not (too_deep or too_many), f"copied a tree past the limits ({deepest} deep, {entries} entries)"
        if chain <= 10:  # os.walk's paths stay short enough to compare
            assert _describe(dest) == _describe(src)
        try:
            used, counted = tree_walk.usage(src, what="the tree", max_entries=cap)
        except tree_walk.TreeLimitError as e:
            raise AssertionError(f"the accounting refused what the copy took: {e}") from None
        assert counted == entries
    _outside_intact(outside)
    tree_walk.empty_folder(dest)
    assert os.listdir(dest) == []
    tree_walk.remove_tree(src)
    assert not src.exists()
    _outside_intact(outside)


@SETTINGS
@given(
    shape=st.dictionaries(NAMES, TREES, min_size=1, max_size=8).map(Dir),
    moves=st.lists(
        st.sampled_from(["vanish", "to_dir", "to_link", "to_fifo", "to_file", "ghost", "keep"]), min_size=1, max_size=8
    ),
)
def test_names_that_vanish_or_change_type_after_the_listing_are_skipped(place, monkeypatch, shape, moves):
    """Every listing is followed, before the walker looks at a name, by real changes to the tree:
    a listed entry removed, replaced by a folder, a link out, a FIFO or a file, a name that was
    never there. Copy, accounting and clean-up go on; the copy follows nothing."""
    base, outside = place
    src, dest = base / "src", base / "dest"
    for d in (src, dest):
        tree_walk.remove_tree(d)
        d.mkdir()
    top = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _build(top, shape, outside)
    finally:
        os.close(top)
    real_names = tree_walk._names
    turn = iter(range(10**6))
    changing = []  # the changes' own removals list folders too: those are not raced

    def racing_names(fd: int, room: int):
        names = real_names(fd, room)
        if not names or changing:
            return names
        changing.append(True)
        try:
            for i, name in enumerate(list(names)):
                move = moves[(next(turn) + i) % len(moves)]
                _change(fd, name, move, outside)
                if move == "ghost":
                    names.append(name + ".ghost")
        finally:
            changing.pop()
        return names

    monkeypatch.setattr(tree_walk, "_names", racing_names)
    copy_tree_safely(src, dest)
    tree_walk.usage(src, what="the tree")
    assert not [p for p in dest.rglob("*") if p.is_file() and not p.is_symlink() and p.read_bytes() == CANARY], (
        "the copy followed a link out of the tree"
    )
    tree_walk.empty_folder(dest)
    tree_walk.remove_tree(src)
    monkeypatch.undo()
    assert os.listdir(dest) == [] and not src.exists()
    _outside_intact(outside)


def _change(fd: int, name: str, move: str, outside: Path) -> None:
    if move in ("keep", "ghost"):
        return
    st_ = tree_walk.lstat_at(fd, name)
    if st_ is not None:
        if stat.S_ISDIR(st_.st_mode):
            tree_walk.remove_tree(f"/proc/self/fd/{fd}/{name}")
        else:
            os.unlink(name, dir_fd=fd)
    if move == "to_dir":
        os.mkdir(name, dir_fd=fd)
    elif move == "to_link":
        os.symlink(str(outside / "canary"), name, dir_fd=fd)
    elif move == "to_fifo":
        os.mkfifo(name, dir_fd=fd)
    elif move == "to_file":
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))


def test_a_tree_churned_by_a_thread_is_walked_without_an_exception(place):
    """A thread creates, deletes and retypes names (files, folders, links out, FIFOs) as fast as it
    can while the tree is copied, sized and emptied: the notebook's thread during the pre-probe copy."""
    base, outside = place
    src = base / "src"
    src.mkdir()
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        moves = ["to_file", "to_dir", "to_link", "to_fifo", "vanish"]
        top = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
        i = 0
        try:
            while not stop.is_set():
                i += 1
                name = f"n{i % 37}"
                try:
                    _change(top, name, moves[i % len(moves)], outside)
                    if i % 5 == 1:
                        _chain(top, 3, name=f"c{i % 11}")
                except OSError:
                    pass
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            os.close(top)

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for round_ in range(15):
            dest = base / f"dest{round_}"
            dest.mkdir()
            copy_tree_safely(src, dest)
            tree_walk.usage(src, what="the tree")
            assert not [
                p for p in dest.rglob("*") if p.is_file() and not p.is_symlink() and p.read_bytes() == CANARY
            ], "the copy followed a link out of the tree"
            tree_walk.remove_tree(dest)
            assert not dest.exists()
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not errors, errors
    tree_walk.remove_tree(src)
    assert not src.exists()
    _outside_intact(outside)


# ------------------------------------------------------------------ depth and width
def test_clean_up_removes_a_tree_3000_deep_with_few_descriptors(place):
    """Any depth is removed (it is the grader's disk), with at most REMOVE_OPEN_MAX folders open:
    under a limit of 128 descriptors, where an fd per level (or recursion) could not go."""
    base, outside = place
    tree = base / "deep"
    tree.mkdir()
    top = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _chain(top, 3000)
        _chain(top, 700, name="x" * 200)  # paths far past PATH_MAX
        os.symlink(str(outside), "out", dir_fd=top)
    finally:
        os.close(top)
    with pytest.raises(tree_walk.TreeLimitError, match="nested deeper than 256 folders"):
        tree_walk.usage(tree, what="the working directory")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # 128 descriptors beyond those this test process already holds (a busy pytest worker may hold
    # more than 128 itself): far fewer than the tree's 3,700 levels
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 128, hard))
    try:
        tree_walk.remove_tree(tree)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert not tree.exists()
    _outside_intact(outside)


def test_a_wide_tree_stops_at_the_entry_cap_and_is_still_removed(place):
    base, _ = place
    wide = base / "wide"
    wide.mkdir()
    for i in range(3000):
        (wide / f"f{i}").touch()
    with pytest.raises(tree_walk.TreeLimitError, match="holds more than 2,000 files and folders"):
        tree_walk.usage(wide, what="the working directory", max_entries=2000)
    tree_walk.empty_folder(wide)
    assert os.listdir(wide) == []


@pytest.mark.root  # entries of another uid
def test_in_a_shared_folder_only_the_uids_entries_go_at_any_depth(place):
    base, _ = place
    shared, uid = base / "shm", 64124  # no process runs as it
    shared.mkdir()
    (shared / "other").write_bytes(b"neighbour's")
    mine = shared / "mine"
    mine.mkdir()
    top = os.open(mine, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _chain(top, 400)
    finally:
        os.close(top)
    os.chown(mine, uid, uid)
    assert remove_owned(shared, uid) == 1
    assert os.listdir(shared) == ["other"]


def test_removal_never_follows_a_link_and_a_missing_path_is_fine(place):
    base, outside = place
    link = base / "link-to-outside"
    os.symlink(outside, link)
    tree_walk.remove_tree(link)
    assert not os.path.lexists(link)
    tree_walk.remove_tree(base / "never-existed")
    _outside_intact(outside)


# ------------------------------------------------------------------ the front ends' walks
def _gradescope_choice(root: Path) -> str | None:
    from autograder.gradescope.run import find_notebook

    return find_notebook(root, "07-quantization.ipynb").chosen


def _batch_names(root: Path) -> list[str]:
    from autograder.batch.sources import discover

    return sorted(s.name for s in discover(root, root.parent / "staging").submissions)


def _peeked_names(root: Path) -> list[str]:
    from autograder.assignment_match import source_notebooks

    return [facts.name for facts in source_notebooks(root)]


FRONT_ENDS = {
    # front end: (what it finds in the upload, what it must find)
    "gradescope: the student's upload": (_gradescope_choice, "work/07-quantization.ipynb"),
    "batch: an unpacked Gradescope export": (_batch_names, ["submission_1"]),
    "assignment match: a batch source's notebooks": (_peeked_names, ["07-quantization.ipynb"]),
}


@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS))
def test_every_front_end_walks_an_upload_1500_deep_without_an_exception(place, front_end):
    """Uploads and exports are student trees too: a folder nested 1,500 deep beside the notebook
    (``os.walk`` recursed into it: ``RecursionError``) is passed over, the notebook found."""
    base, outside = place
    find, expected = FRONT_ENDS[front_end]
    root = base / "upload"
    work = root / "submission_1" / "work" if front_end.startswith("batch") else root / "work"
    work.mkdir(parents=True)
    if front_end.startswith("batch"):
        (root / "submission_metadata.yml").write_text("submission_1:\n  :submitters: []\n")
    (work / "07-quantization.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    os.symlink(str(outside / "canary"), work / "linked.ipynb")
    top = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _chain(top, 1500)
    finally:
        os.close(top)
    assert find(root) == expected
    _outside_intact(outside)
