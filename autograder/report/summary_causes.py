"""The summary's "Most common failures", by root cause: what one submission's failures come to.

A broken cell that leaves three functions unmeasured is one cause, not the 30 parts of their
checks; so is a function still the starter's stub, and a missing file whose cell failed (however
many checks read it); parts not measured for one reason are one; a measured part that failed is
its own. The
cause a check carries is the judge's (grade.json's ``cause``, :mod:`autograder.root_cause`).
"""

from __future__ import annotations

from typing import Any


_CAUSE_KINDS = {
    "syntax_error": "has a syntax error",
    "error": "raised an error before the definition",
    "timeout": "ran out of time",
    "not_run": "did not run",
    "undefined": "is missing",
}
# causes that are not about the cell defining a function: said in their own words
_OWN_WORDS = {
    "unwritten": "{them}: still the starter's stub, not written yet",
    "file": "{them} missing: the cell that names {it} failed",
}


def root_causes(row: dict[str, Any], grade: Any, titles: dict[str, str]) -> dict[tuple[str, ...], tuple[str, str]]:
    """A submission's failures, one entry per root cause: ``key → (label, example)``. The checks
    whose functions' defining cell failed share one entry per cell and problem; parts not
    measured share one per check and reason; a measured part that failed is its own."""
    out: dict[tuple[str, ...], tuple[str, str]] = {}
    checks = grade.get("checks") if isinstance(grade, dict) else None
    if not isinstance(checks, list):  # no grade.json: the row's own list of failed parts
        for f in row.get("failures", []):
            out.setdefault(
                (f["check"], f["part"]),
                (f"{titles.get(f['check'], f['check'])}: {f['part']}", str(f.get("reason") or f.get("message") or "")),
            )
        return out
    by_cell: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for check in (c for c in checks if isinstance(c, dict) and not c.get("passed")):
        cid, title = str(check.get("id")), titles.get(str(check.get("id")), str(check.get("title", check.get("id"))))
        cause = check.get("cause")
        if isinstance(cause, dict) and cause.get("text"):
            by_cell.setdefault((str(cause.get("kind")), str(cause.get("where"))), []).append(
                (str(cause.get("name")), str(cause["text"]))
            )
            # the cause says why; parts measured on a stub or beside a failed cell add nothing
            parts = (
                [] if cause.get("kind") in _OWN_WORDS else [p for p in check.get("parts", []) if not p.get("reason")]
            )
        else:
            parts = check.get("parts", [])
        for p in parts:
            if p.get("passed"):
                continue
            if p.get("reason"):
                out.setdefault((cid, "not measured", str(p["reason"])), (f"{title}: not measured", str(p["reason"])))
            else:
                out.setdefault((cid, str(p.get("name"))), (f"{title}: {p.get('name')}", str(p.get("message") or "")))
    for (kind, _where), named in by_cell.items():
        names = sorted({n for n, _ in named})
        them = ", ".join(names)
        it = "it" if len(names) == 1 else "them"
        said = (
            _OWN_WORDS[kind].format(them=them, it=it)
            if kind in _OWN_WORDS
            else f"{them}: the cell that defines {it} {_CAUSE_KINDS.get(kind, kind)}"
        )
        out.setdefault(("cause", kind, them), (said, named[0][1]))
    return out
