"""The summary page's CSS and its one inline script (sortable tables), and the Content-Security-
Policy that allows exactly that script by its hash: any other script (one injected through a
student's text that escaped escaping) does not run, and nothing is loaded from the network."""

from __future__ import annotations

import base64
import hashlib

SORT_SCRIPT = """
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
"""

SCRIPT_HASH = base64.b64encode(hashlib.sha256(SORT_SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = (f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{SCRIPT_HASH}'")

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem auto;max-width:1180px;color:#222;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
h3{font-size:1rem;margin:.8rem 0 .3rem}
.meta,.note{color:#666} .stats{display:flex;flex-wrap:wrap;gap:.6rem}
.stat{border:1px solid #ddd;border-radius:6px;padding:.4rem .8rem;min-width:6rem}
.stat b{display:block;font-size:1.2rem} .stat span{color:#666;font-size:.85rem}
.warn{background:#fff8e1;padding:.2rem 1rem;border-radius:6px}
.attention{background:#fdecea;border-left:5px solid #c62828;padding:.3rem 1rem;border-radius:6px}
.attention.clear{background:#edf7ed;border-left-color:#2e7d32}
.attention li{margin:.25rem 0}
table{border-collapse:collapse;width:100%;font-size:13px;table-layout:fixed}
th,td{border-bottom:1px solid #eee;padding:.25rem .4rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f6f6f6;font-weight:600} table.sortable th{cursor:pointer}
table.sortable th[aria-sort=ascending]::after{content:" ▲"} table.sortable th[aria-sort=descending]::after{content:" ▼"}
.pass{color:#1b7f3b} .fail{color:#b3261e;font-weight:600} .num{white-space:nowrap}
.chart{width:100%;height:auto;display:block} .chart .lbl{font-size:13px} .chart .tick{font-size:12px;fill:#555}
.chart .val{font-size:12px;font-weight:600} .chart .grid{stroke:#eee} .chart .axis{stroke:#999}
.chart .count{font-size:10px;fill:#fff;font-weight:700;pointer-events:none} .chart .name{font-size:11px;fill:#333}
.chart a:hover rect,.chart a:hover circle{stroke:#000;stroke-width:2}
.legend{display:flex;flex-wrap:wrap;gap:.4rem 1.2rem;font-size:13px;margin:.4rem 0}
.legend svg{vertical-align:middle}
details{border:1px solid #e4e4e4;border-radius:6px;padding:.3rem .7rem;margin:.4rem 0}
summary{cursor:pointer} .names a{margin-right:.5rem;overflow-wrap:anywhere}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:.6rem}
pre.code{background:#fafafa;border:1px solid #eee;padding:.4rem;font-size:12px;white-space:pre-wrap;
overflow-wrap:anywhere;max-height:22rem;overflow-y:auto;margin:.2rem 0}
mark{background:#ffe08a} .tag{display:inline-block;border-radius:4px;padding:0 .35rem;font-size:12px;background:#eee}
.tag.flag{background:#c62828;color:#fff}
"""
