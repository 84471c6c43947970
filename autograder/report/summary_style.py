"""The summary page's one inline script (sortable tables), and the Content-Security-Policy that
allows exactly that script by its hash: any other script (one injected through a student's text
that escaped escaping) does not run, and nothing is loaded from the network. (The page's CSS is
in its template, ``templates/summary.html``.)"""

from __future__ import annotations

import base64
import hashlib

from .page_templates import own_markup

SORT_SCRIPT = own_markup("""
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.tabIndex = 0;
    th.title = (th.title ? th.title + " · " : "") + "click to sort";
    function sort() {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      function key(row) {
        var cell = row.cells[col]; if (!cell) return "";
        var v = cell.getAttribute("data-sort"); if (v === null) v = cell.textContent.trim();
        var n = parseFloat(v); return isNaN(n) || !/^-?[0-9.]/.test(v) ? v.toLowerCase() : n;
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x === typeof y) return (x < y ? -1 : x > y ? 1 : 0) * dir;
        return (typeof x === "number" ? -1 : 1) * dir;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    }
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); } });
  });
});
""")

SCRIPT_HASH = base64.b64encode(hashlib.sha256(SORT_SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = own_markup(f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{SCRIPT_HASH}'")
