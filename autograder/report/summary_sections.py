"""Pieces of summary.html: sortable tables, links to submissions, and the sections that are
lists rather than charts (needs attention, integrity, tolerances). Everything from a submission
is escaped here; ``Html`` marks markup already built from escaped parts."""

from __future__ import annotations

import html
from typing import Any, Iterable

from ..student_text import clean
from .integrity_view import cells_text
from .summary_charts import feedback_href

MAX_CELL = 300
FLAG = '<span class="tag flag">flagged</span> '
EXPECTED = '<span class="tag">expected</span> '
NEEDS_ATTENTION = {
    "timeout": "ran out of time",
    "kernel_died": "the kernel died (memory, a crash)",
    "grader_error": "the grader itself failed (see their submission.json)",
    "sandbox_error": "the jail could not run them",
    "startup_failed": "the kernel did not start",
    "unreadable": "no notebook could be read",
    "not_graded": "not graded yet (the batch did not finish)",
}


class Html(str):
    """Markup built from escaped parts (not escaped again)."""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _cap(x: Any, n: int = MAX_CELL) -> str:
    return clean(x, n)


def names_html(names: Iterable[str], *, limit: int | None = None, submitters: str | None = None) -> Html:
    """Links to each submission's feedback; ``limit`` shows the first ones and counts the rest."""
    names = list(names)
    shown = names if limit is None else names[:limit]
    links = " ".join(f'<a href="{_e(feedback_href(n))}">{_e(n)}</a>' for n in shown)
    if limit is not None and len(names) > limit:
        links += f' <span class="note">+{len(names) - limit} more</span>'
    if submitters:
        links += f' <span class="note">({_e(_cap(submitters, 80))})</span>'
    return Html(f'<span class="names">{links}</span>')


def _cell(value: Any) -> str:
    sort = None
    if isinstance(value, tuple):
        value, sort = value
    text = value if isinstance(value, Html) else _e(_cap(value))
    attr = f' data-sort="{_e(sort)}"' if sort is not None else ""
    return f"<td{attr}>{text}</td>"


def table(title: str, header: list[str], rows: list[list[Any]], *, empty: str = "None.", note: str = "",
          widths: list[float] | None = None, anchor: str = "") -> str:
    """A section with a sortable table. A cell is text (escaped), ``Html``, or ``(shown, sort key)``."""
    ident = f' id="{_e(anchor)}"' if anchor else ""
    head = f"<h2>{_e(title)}</h2>" + (f'<p class="note">{_e(note)}</p>' if note else "")
    if not rows:
        return f'<section{ident}>{head}<p class="note">{_e(empty)}</p></section>'
    cols = "".join(f'<col style="width:{w:.2f}%">' for w in widths) if widths else ""
    th = "".join(f'<th title="{_e(h)}">{_e(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return (f'<section{ident}>{head}<table class="sortable"><colgroup>{cols}</colgroup><thead><tr>{th}</tr></thead>'
            f"<tbody>{body}</tbody></table></section>")


# ── needs attention ───────────────────────────────────────────────────────────────────────────

def attention_section(rows: list[dict[str, Any]], drift: list[str], integrity: Any, *,
                      not_attempted: list[str] = ()) -> str:
    items = []
    for status, meaning in NEEDS_ATTENTION.items():
        hit = [r for r in rows if r["status"] == status]
        if hit:
            reasons = {str(r.get("reason") or "") for r in hit} - {""}
            why = f' <span class="note">e.g. {_e(_cap(sorted(reasons)[0], 160))}</span>' if reasons else ""
            items.append(f"<li><b>{len(hit)} {_e(status)}</b>: {_e(meaning)}: "
                         f"{names_html(sorted(r['name'] for r in hit), limit=30)}{why}</li>")
    if not_attempted:
        items.append(f"<li><b>{len(not_attempted)} not attempted</b>: they ran, but nothing of their own work "
                     "could be graded (the untouched starter, no code of their own, or nothing measured); left out "
                     f"of the pass rates and failures: {names_html(not_attempted, limit=30)}</li>")
    for message in drift:
        items.append(f"<li><b>version drift</b>: {_e(message)}</li>")
    flagged = list(getattr(integrity, "flagged", []) or [])
    if flagged:
        pairs = ", ".join(f"{_e(p.a)} ~ {_e(p.b)} ({p.share:.0%})" for p in flagged[:10])
        items.append(f'<li><b>{len(flagged)} integrity flag(s)</b>: <a href="#integrity">pairs of notebooks that '
                     f"share most of their code</a>: {pairs}{' …' if len(flagged) > 10 else ''} "
                     '<span class="note">(a lead to read, not a verdict)</span></li>')
    if getattr(integrity, "error", None):
        items.append(f"<li><b>integrity report failed</b>: {_e(_cap(integrity.error))}</li>")
    if not items:
        return ('<section class="attention clear"><h2>Needs attention</h2><p>Nothing: every notebook ran to the '
                "end and was attempted, the grader did not fail, the versions match the tolerances' and no pair "
                "of notebooks is flagged.</p></section>")
    return f'<section class="attention" id="attention"><h2>Needs attention</h2><ul>{"".join(items)}</ul></section>'


# ── integrity ─────────────────────────────────────────────────────────────────────────────────

def integrity_section(report: Any) -> str:
    if report is None:
        return ""
    title = "Integrity: notebooks that share code"
    intro = (f"Every pair of the {report.compared} notebooks with code of their own was compared (copydetect "
             "fingerprints; comments, whitespace and names do not count; the starter's code is left out). "
             f"Pairs sharing at least {report.threshold:.0%} are flagged: a lead for a human to read, never a "
             "verdict. Highlighted: the code found in both.")
    if report.too_little_code:
        intro += (f" Not compared, too little code of their own: "
                  f"{', '.join(report.too_little_code[:10])}{' …' if len(report.too_little_code) > 10 else ''}.")
    expected = sum(1 for p in report.pairs if getattr(p, "expected", False))
    if expected:
        intro += (f" {len(report.family)} submissions are, byte for byte, the assignment's own examples (variants "
                  f"of one solution, e.g. what the demo grades): their {expected} listed pair(s) share code by "
                  "construction and are marked expected, not flagged.")
    shown = [p for p in report.pairs[:10]] + [p for p in report.flagged[10:30]]
    if not shown:
        return (f'<section id="integrity"><h2>{_e(title)}</h2><p class="note">{_e(intro)}</p>'
                '<p class="note">No pair shares a noticeable part of its code.</p></section>')
    rows = "".join(
        f"<tr><td>{names_html([p.a])} ~ {names_html([p.b])}</td><td data-sort=\"{p.share}\">"
        f'{FLAG if p.flagged else EXPECTED if getattr(p, "expected", False) else ""}{p.share:.0%}</td>'
        f"<td>{_e(cells_text(p.cells_a))}</td><td>{_e(cells_text(p.cells_b))}</td></tr>"
        for p in shown)
    head = ('<table class="sortable"><colgroup><col style="width:44%"><col style="width:16%"><col style="width:20%">'
            '<col style="width:20%"></colgroup><thead><tr><th>pair</th><th>overlap share</th><th>cells (first)</th>'
            f"<th>cells (second)</th></tr></thead><tbody>{rows}</tbody></table>")
    code = "".join(
        f"<details{' open' if k < 3 and p.flagged else ''}><summary>{_e(p.a)} ~ {_e(p.b)}: {p.share:.0%}</summary>"
        f'<div class="pair"><div><b>{_e(p.a)}</b> ({_e(cells_text(p.cells_a))})'
        f'<pre class="code">{p.snippet_a}</pre></div><div><b>{_e(p.b)}</b> ({_e(cells_text(p.cells_b))})'
        f'<pre class="code">{p.snippet_b}</pre></div></div></details>'
        for k, p in enumerate(shown) if p.snippet_a or p.snippet_b)
    return f'<section id="integrity"><h2>{_e(title)}</h2><p class="note">{_e(intro)}</p>{head}{code}</section>'


# ── tolerances ────────────────────────────────────────────────────────────────────────────────

def tolerances_section(record: Any, drift: list[str]) -> str:
    if not isinstance(record, dict):
        return ""
    cal = record.get("calibrated") or {}
    lines = [f"<li>calibrated: <code>{_e(cal.get('path', ''))}</code> "
             f"<span class=\"note\">sha256 {_e(str(cal.get('sha256', ''))[:16])}…</span></li>"]
    override = record.get("override")
    if isinstance(override, dict):
        changed = override.get("changed") or {}
        lines.append(f"<li>override: <code>{_e(override.get('path', ''))}</code> "
                     f"<span class=\"note\">sha256 {_e(str(override.get('sha256', ''))[:16])}…</span>; "
                     f"{len(changed)} key(s) changed</li>")
        rows = "".join(f"<tr><td><code>{_e(k)}</code></td><td>{_e(v.get('calibrated'))}</td><td><b>{_e(v.get('value'))}"
                       "</b></td></tr>" for k, v in changed.items())
        table_ = ('<table><thead><tr><th>tolerance</th><th>calibrated</th><th>used</th></tr></thead>'
                  f"<tbody>{rows}</tbody></table>") if rows else ""
    else:
        lines.append("<li>no override: the calibrated values as they are</li>")
        table_ = ""
    if drift:
        lines.append("<li>version drift: see Needs attention</li>")
    return f'<section id="tolerances"><h2>Tolerances used</h2><ul>{"".join(lines)}</ul>{table_}</section>'
