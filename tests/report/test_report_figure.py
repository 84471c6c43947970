"""The picture of a student's model, drawn from fixed numbers: feedback.html and the Gradescope test.

The section is made here (figurekit), not measured: these tests are about drawing, escaping and
never failing. tests/measure/test_models_figure.py measures real sections; the reference notebook's
picture, end to end, is in tests/report/test_report_figure_reference.py.
"""

from __future__ import annotations

import base64
import copy
import json
import re

import figurekit as kit
import pytest

from autograder import pipeline
from autograder.report import figure
from autograder.report.feedback import feedback_markdown
from autograder.report.feedback_html import CSP, FIGURE_HEADING, feedback_html, figure_html
from autograder.report.gradescope_figure import NAME, PNG_DPI, TAG, figure_tests
from autograder.report.gradescope_results import results_json

GRADE = {
    "assignment": "demo",
    "score": 7.0,
    "max_score": 10.0,
    "checks": [
        {
            "id": "one",
            "title": "First check",
            "visibility": "visible",
            "score": 7.0,
            "max_score": 10.0,
            "passed": False,
            "parts": [
                {
                    "name": "accuracy",
                    "passed": True,
                    "points": 7,
                    "score": 7,
                    "measured": 0.9,
                    "threshold": 0.8,
                    "op": ">=",
                    "message": "accuracy 0.9",
                    "hint": "",
                    "reason": None,
                },
                {
                    "name": "size",
                    "passed": False,
                    "points": 3,
                    "score": 0,
                    "measured": 0.5,
                    "threshold": 0.3,
                    "op": "<=",
                    "message": "ratio 0.5 <img src=x onerror=alert(1)>",
                    "hint": "make it smaller",
                    "reason": None,
                },
            ],
        }
    ],
}


@pytest.fixture(scope="module")
def svg() -> str:
    return figure.svg_inline(kit.section())


def test_both_boundaries_every_point_and_the_worst_are_drawn(svg):
    drawn = kit.parts(svg)
    assert drawn["boundary-0"] >= 1 and drawn["boundary-1"] >= 1, drawn
    assert drawn["points-0"] == 30 and drawn["points-1"] == 20, drawn
    assert sorted(k for k in drawn if k.startswith("worst-") and "label" not in k) == ["worst-1", "worst-2", "worst-3"]
    assert sorted(k for k in drawn if k.startswith("worst-label-")) == [f"worst-label-{r}" for r in (1, 2, 3)]
    assert drawn["disagree"] >= 1, "the boundaries differ, so the band between them is shaded"


def test_title_axis_labels_legend_and_colour_bar_are_text(svg):
    words = kit.texts(svg)
    for label in (
        "Fixed numbers on a plane",
        "feature x0",
        "feature x1",
        "model A boundary",
        "model B boundary",
        "test points",
        "edge points",
        "the models pick different classes",
        "the 3 largest drifts, numbered",
        "drift per row (log scale)",
    ):
        assert label in words, f"{label!r} is not in the picture: {words}"
    assert {"1", "2", "3"} <= set(words), "the worst points are numbered"


def test_the_svg_is_deterministic_and_has_no_script_or_external_reference(svg):
    assert figure.svg_inline(kit.section()) == svg
    assert "<script" not in svg and "<metadata" not in svg
    assert not re.findall(r"https?://(?!www\.w3\.org/(2000/svg|1999/xlink)\b)", svg), "only the SVG namespaces"
    assert not re.search(r"""(href|src)\s*=\s*["'](?!#|data:)""", svg), "only internal references"


def test_identical_boundaries_shade_nothing_and_a_one_class_model_has_no_contour():
    same = kit.section()
    same["boundaries"][1]["p1"] = same["boundaries"][0]["p1"]
    assert "disagree" not in kit.parts(figure.svg_inline(same))
    flat = kit.section()
    flat["boundaries"][1]["p1"] = kit.encode(kit.p1_grid(0.0) * 0 + 0.9)  # class 1 everywhere
    drawn = kit.parts(figure.svg_inline(flat))
    assert "boundary-1" not in drawn and drawn["boundary-0"] >= 1 and drawn["disagree"] >= 1


def test_png_is_a_png():
    data = figure.render(kit.section(), "png", dpi=50)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000


@pytest.mark.parametrize(
    "change, says",
    [
        ({"kind": "pie"}, "kind 'pie'"),
        ({"grid": {"x": [0, 1], "y": [0, 1], "shape": [kit.N, kit.N + 1]}}, "grid values"),
        ({"grid": {"x": [1, 0], "y": [0, 1], "shape": [kit.N, kit.N]}}, "empty or oversized"),
        ({"grid": {"x": [0, 1], "y": [0, 1], "shape": [100_000, 2]}}, "empty or oversized"),
        ({"grid": "nope"}, "grid"),
        ({"boundaries": [{"label": "x", "p1": "not base64!"}]}, "boundary"),
        ({"boundaries": []}, "no boundary"),
        ({"points": [{"label": "p", "xy": [[0, 0]], "value": [1, 2]}]}, "1 points and 2 values"),
        ({"points": "many"}, "points: not a list"),
        ({"worst": [{"xy": "here"}]}, "worst"),
    ],
)
def test_a_malformed_section_is_a_sentence_never_a_crash(change, says):
    broken = kit.section(**change)
    problem = figure.figure_problem(broken)
    assert problem and problem.startswith("no picture: the grader's figure data is malformed") and says in problem
    page = figure_html({"figure": broken})
    assert "<svg" not in page and "no picture" in page
    [test] = figure_tests({"figure": broken}, number=3)
    assert "<img" not in test["output"] and "no picture" in test["output"]


def test_an_error_section_gives_its_sentence_escaped():
    why = {"error": "no picture: int8_qdq.onnx is <b>not</b> quantized & so on"}
    page = figure_html({"figure": why})
    assert FIGURE_HEADING in page and "<svg" not in page
    assert "is &lt;b&gt;not&lt;/b&gt; quantized &amp; so on" in page
    [test] = figure_tests({"figure": why}, number=2)
    assert test["output"] == "<p>no picture: int8_qdq.onnx is &lt;b&gt;not&lt;/b&gt; quantized &amp; so on</p>"


def test_a_drawing_failure_is_a_sentence(monkeypatch):
    def boom(*_a, **_k):
        raise RuntimeError("matplotlib broke")

    monkeypatch.setattr("autograder.report.feedback_html.svg_inline", boom)
    monkeypatch.setattr("autograder.report.gradescope_figure.png_data_uri", boom)
    assert "no picture: drawing it failed (RuntimeError)" in figure_html({"figure": kit.section()})
    assert "drawing it failed" in figure_tests({"figure": kit.section()}, 2)[0]["output"]


def test_labels_and_caption_cannot_inject_markup_or_mathtext():
    hostile = kit.section(
        title="$\\frac{a}{b}$ <script>alert(1)</script>", caption='"><img src=x onerror=alert(1)> $x$'
    )
    svg = figure.svg_inline(hostile)
    assert "<script" not in svg and "&lt;script&gt;" in svg
    assert "$\\frac{a}{b}$ &lt;script&gt;alert(1)&lt;/script&gt;" in svg, "a $ is drawn as a character, not as mathtext"
    page = figure_html({"figure": hostile})
    assert "<img" not in page.split("<figcaption>")[1] and "&lt;img src=x" in page
    test = figure_tests({"figure": hostile}, 2)[0]["output"]
    assert test.count("<img") == 1 and "&lt;img src=x" in test


def test_without_a_figure_section_there_is_no_picture_and_no_test():
    assert figure_html({"models": {}}) == "" and figure_html(None) == ""
    assert figure_tests({"models": {}}, 4) == []
    page = feedback_html(feedback_markdown(GRADE, {}), {})
    assert FIGURE_HEADING not in page and "First check" in page


def test_the_page_has_the_feedback_the_picture_after_the_score_and_a_strict_csp(svg):
    md = feedback_markdown(GRADE, {"figure": kit.section()})
    page = feedback_html(md, {"figure": kit.section()}, title="Feedback <demo>")
    assert f'content="{CSP}"' in page and "script-src" not in CSP and "default-src 'none'" in CSP
    assert "<script" not in page and "<title>Feedback &lt;demo&gt;</title>" in page
    score, pic, check = page.index("Score: 7 / 10"), page.index(FIGURE_HEADING), page.index("First check")
    assert score < pic < check, "the picture sits between the score and the checks"
    assert svg in page and "A caption under the picture." in page
    assert "<img" not in page, "the student's text stays text"
    assert "ratio 0.5 &lt;img src=x onerror=alert(1)&gt;" in page


def test_results_json_gets_one_html_test_with_a_png_data_uri(results_validator):
    measurements = {"figure": kit.section()}
    results = results_json(GRADE, measurements)
    results_validator(results)
    assert [t["tags"] for t in results["tests"]] == [["one"], [TAG]]
    test = results["tests"][-1]
    assert test["name"] == NAME and test["number"] == "2" and test["output_format"] == "html"
    assert test["score"] == test["max_score"] == 0 and test["visibility"] == "visible"
    assert results["score"] == 7.0, "the picture adds no points"
    uri = re.search(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', test["output"])
    assert uri and base64.b64decode(uri[1])[:4] == b"\x89PNG"
    assert "A caption under the picture." in test["output"]


def test_the_section_is_not_changed_by_drawing():
    s = kit.section()
    before = copy.deepcopy(s)
    figure.render(s, "svg")
    assert s == before


def test_a_rescore_reads_the_kept_picture_instead_of_drawing_it_again(tmp_path, monkeypatch):
    from autograder.report.feedback_html import write_feedback_html

    measurements = {"figure": kit.section()}
    md = feedback_markdown(GRADE, measurements)
    first = write_feedback_html(tmp_path, md, measurements).read_text()
    first_results = results_json(GRADE, measurements, figure_cache=tmp_path)
    kept = sorted(p.name for p in tmp_path.glob("figure-*"))
    assert sorted(p.rsplit(".", 1)[1] for p in kept) == ["png", "svg"]

    def no_drawing(*_a, **_k):
        raise AssertionError("drew the picture again")

    monkeypatch.setattr(figure, "render", no_drawing)
    assert write_feedback_html(tmp_path, md, measurements).read_text() == first
    assert results_json(GRADE, measurements, figure_cache=tmp_path) == first_results
    monkeypatch.undo()

    moved = {"figure": kit.section(title="Another picture")}
    assert "Another picture" in write_feedback_html(tmp_path, md, moved).read_text()
    assert len(list(tmp_path.glob("figure-*.svg"))) == 1, "the older picture is replaced, not kept beside it"
    write_feedback_html(tmp_path, md, {"figure": {"error": "no picture: nothing measured"}})
    assert not list(tmp_path.glob("figure-*.svg")), "a grade without a picture leaves none of an older grade"


def test_one_drawing_saved_in_two_formats_is_what_each_format_drawn_alone_gives():
    svg, png = figure.render_formats(kit.section(), [("svg", 96), ("png", 50)])
    assert svg == figure.render(kit.section(), "svg", dpi=96)
    assert png == figure.render(kit.section(), "png", dpi=50), "saving the SVG first changed the PNG"


def test_the_pictures_drawn_before_the_reports_are_the_ones_they_show(tmp_path, monkeypatch):
    from autograder.report.feedback_html import write_feedback_html
    from autograder.report.gradescope_figure import PNG_DPI

    measurements = {"figure": kit.section()}
    drawings = []
    render_formats = figure.render_formats
    monkeypatch.setattr(figure, "render_formats", lambda *a: drawings.append(a[1]) or render_formats(*a))
    figure.cache_pictures(measurements["figure"], tmp_path, [("svg", figure.SVG_DPI), ("png", PNG_DPI)])
    figure.cache_pictures(measurements["figure"], tmp_path, [("svg", figure.SVG_DPI), ("png", PNG_DPI)])
    assert drawings == [[("svg", figure.SVG_DPI), ("png", PNG_DPI)]], "drawn once, and not again when kept"
    page = write_feedback_html(tmp_path, feedback_markdown(GRADE, measurements), measurements).read_text()
    tests = results_json(GRADE, measurements, figure_cache=tmp_path)["tests"]
    assert len(drawings) == 1, "the reports read the kept pictures"
    drawn = figure.render(kit.section(), "svg").decode()
    assert drawn[drawn.index("<svg") :] in page
    png = base64.b64encode(figure.render(kit.section(), "png", dpi=PNG_DPI)).decode("ascii")
    assert any(png in t["output"] for t in tests)


def test_the_colour_bar_is_labelled_in_decades_as_plain_text(svg):
    assert {"10⁻⁴", "10⁻³", "10⁻²", "10⁻¹"} <= set(kit.texts(svg)), kit.texts(svg)
    assert [figure._decade(v) for v in (1e-4, 0.01, 1.0, 0.05)] == ["10⁻⁴", "10⁻²", "10⁰", "0.05"]


def test_the_page_title_is_feedback_md_s_title_shown_literally(tmp_path):
    from autograder.report.feedback_html import write_feedback_html

    md = "# Feedback · a\\_b \\*c\\* &lt;x&gt;\n\n**Score: 1 / 2**\n"
    page = write_feedback_html(tmp_path, md, None).read_text()
    assert "<title>Feedback · a_b *c* &lt;x&gt;</title>" in page


def test_nothing_graded_and_no_picture_gives_no_picture_sentence():
    """The short form alone speaks when nothing could be graded and no picture was made; a real
    picture is still shown whatever the score."""
    nothing = copy.deepcopy(GRADE)
    for part in nothing["checks"][0]["parts"]:
        part["passed"], part["score"] = False, 0
    no_pic = {"figure": {"error": "no picture: artifacts/fp32.onnx is missing"}}
    assert not [t for t in results_json(nothing, no_pic)["tests"] if TAG in t.get("tags", [])]
    assert [t for t in results_json(GRADE, no_pic)["tests"] if TAG in t.get("tags", [])]
    assert figure.no_picture_to_show(nothing, no_pic) and not figure.no_picture_to_show(
        nothing, {"figure": kit.section()}
    )


@pytest.mark.parametrize(
    "reports",
    [
        pipeline.REPORT_FILES,
        (pipeline.RESULTS_FILE,),  # Gradescope's front end: results.json alone
        (pipeline.RESULTS_FILE, pipeline.FEEDBACK_FILE),
        (pipeline.FEEDBACK_HTML_FILE,),  # results.json is written all the same
    ],
    ids=["all", "results.json", "results.json+feedback.md", "feedback.html"],
)
def test_the_picture_is_drawn_once_only_in_the_formats_of_the_reports_written(
    reports, assignment07, tmp_path, monkeypatch
):
    """Each report that shows the picture reads it as drawn before the reports (no report draws
    it again, so each report's format is among those drawn), and no format is drawn for a report
    that is not written: SVG for feedback.html, PNG for results.json, none for feedback.md."""
    measurements = {"schema": 1, "execution": {"status": "completed"}, "figure": kit.section()}
    (tmp_path / pipeline.MEASUREMENTS_FILE).write_text(json.dumps(measurements))
    drawn = []
    render_formats = figure.render_formats
    monkeypatch.setattr(
        figure, "render_formats", lambda s, formats: drawn.append([f for f, _ in formats]) or render_formats(s, formats)
    )
    pipeline.rejudge(tmp_path, assignment07, reports=reports)
    written = {pipeline.RESULTS_FILE, *reports}
    assert drawn == [["svg", "png"] if pipeline.FEEDBACK_HTML_FILE in written else ["png"]]
    assert {p.name for p in tmp_path.iterdir() if p.name in pipeline.REPORT_FILES} == written
    assert sorted(p.suffix for p in tmp_path.glob("figure-*")) == sorted(f".{f}" for f in drawn[0])
    monkeypatch.undo()
    (test,) = [t for t in json.loads((tmp_path / pipeline.RESULTS_FILE).read_text())["tests"] if TAG in t["tags"]]
    png = base64.b64encode(figure.render(kit.section(), "png", dpi=PNG_DPI)).decode("ascii")
    assert f'src="data:image/png;base64,{png}"' in test["output"]
    if pipeline.FEEDBACK_HTML_FILE in written:
        drawn_svg = figure.render(kit.section(), "svg").decode()
        assert drawn_svg[drawn_svg.index("<svg") :] in (tmp_path / pipeline.FEEDBACK_HTML_FILE).read_text()
    if pipeline.FEEDBACK_FILE in written:
        assert "<svg" not in (tmp_path / pipeline.FEEDBACK_FILE).read_text(), "feedback.md has no picture"


@pytest.mark.parametrize(
    "centres",
    [
        [(100.0, 100.0), (101.0, 100.5), (99.5, 101.0), (100.5, 99.0), (100.2, 100.1)],  # five rings on one spot
        [(0.0, 0.0), (10.0, 0.0), (20.0, 0.0), (30.0, 0.0), (40.0, 0.0)],  # a row, closer than a number's box
        [(50.0, 50.0), (300.0, 300.0)],  # far apart: each at its usual place
    ],
    ids=["one spot", "a row", "apart"],
)
def test_drift_numbers_cover_no_other_number_and_no_ring(centres):
    """The numbered drift markers of a crowded spot stay readable: no number's box overlaps
    another's or any ring (figure.label_offsets)."""
    from autograder.report.figure import LABEL_HALF, RING_RADIUS, label_offsets

    offsets = label_offsets(centres)
    boxes = [(cx + dx, cy + dy) for (cx, cy), (dx, dy) in zip(centres, offsets)]
    w, h = LABEL_HALF
    for i, (x, y) in enumerate(boxes):
        for j, (x2, y2) in enumerate(boxes[:i]):
            assert abs(x - x2) >= 2 * w or abs(y - y2) >= 2 * h, (i, j, boxes)
        for rx, ry in centres:
            assert abs(x - rx) > w + RING_RADIUS or abs(y - ry) > h + RING_RADIUS, (i, boxes, centres)
