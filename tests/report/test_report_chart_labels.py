"""The summary's scatter: a submission's name is drawn where it covers no mark and no other name
(summary_charts._place_labels), however crowded the points beyond a limit are."""

from __future__ import annotations

import pytest

from autograder.report import summary_charts as charts


def _boxes(chart):
    out = []
    for m in chart["marks"]:
        label = m.get("name")
        if not label:
            continue
        x, y, width = float(label["x"]), float(label["y"]), charts.LABEL_CHAR_PX * len(label["text"])
        x0 = x if label["anchor"] == "start" else x - width
        out.append((x0, y - charts.LABEL_HEIGHT_PX, x0 + width, y))
    return out


@pytest.mark.parametrize("spread", [0.0005, 0.01, 0.05], ids=["one spot", "close", "apart"])
def test_names_cover_no_mark_and_no_other_name(spread):
    points = {"static": [(0.5 + spread * i, 0.5 + spread * (i % 3), f"student-{i:02d}") for i in range(8)]}
    limits = [{"axis": "x", "value": 0.3, "label": "size limit", "series": "static"}]
    chart = charts.scatter(points, limits, "size ratio", "drift")
    boxes = _boxes(chart)
    assert len(boxes) == 8, "every point beyond the limit is named"
    circles = [(float(m["cx"]), float(m["cy"]), float(m["r"])) for m in chart["marks"]]
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        for b in boxes[:i]:
            assert x1 <= b[0] or x0 >= b[2] or y1 <= b[1] or y0 >= b[3], ("two names overlap", boxes)
        for cx, cy, r in circles:
            nx, ny = min(max(cx, x0), x1), min(max(cy, y0), y1)
            assert (nx - cx) ** 2 + (ny - cy) ** 2 >= r**2, ("a name covers a mark", (x0, y0, x1, y1), (cx, cy, r))
