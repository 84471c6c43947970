"""What the picture of the student's model costs: the grid in the model worker, and the drawing.

    .venv/bin/python bench/bench_figure.py               # 5 rounds
    .venv/bin/python bench/bench_figure.py --rounds 9 --json /tmp/figure.json

1. ``measure``: lesson 07's ``measure_models`` on a reference-sized workspace (an MLP (256, 256),
   converted and quantized as the contract says), with the picture's 100 × 100 grid as one more
   input set of every model worker, and without it; interleaved (order flipped each round).
   Reported: the medians, the median paired difference and ratio.
2. ``grid_cpu_ms``: the grid's own cost, one ``session.run`` of its 10,000 rows per model in
   this process (one thread, CPU time: what the model worker adds, without process noise).
3. ``draw``: building the ``figure`` section from the runs, the SVG of feedback.html and the PNG of
   the Gradescope test, each timed alone (the medians).

No timing is asserted anywhere; the numbers are for bench/README.md and the change's report.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, interleaved, paired_diffs, paired_ratios, spread  # noqa: E402

ASSIGNMENT_ID = "07-quantization"


def reference_sized_workspace(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests" / "measure"))
    import quant_model_factory as factory

    (folder / "models").mkdir(parents=True, exist_ok=True)
    fp32 = factory.train_fp32(folder / "models" / "fp32.onnx", hidden=(256, 256))
    paths = {"fp32": fp32, **factory.quantize(fp32, folder / "models", kinds=("int8_dynamic", "int8_qdq"))}
    return factory.make_workspace(folder / "ws", paths)


def run(rounds: int, workdir: Path) -> dict:
    from autograder.assignment import load_assignment
    from autograder.report import figure as draw

    assignment = load_assignment(ASSIGNMENT_ID, ROOT)
    pkg = assignment.grading.__name__
    models, figure, data = (importlib.import_module(f"{pkg}.{m}") for m in ("models", "figure", "data"))
    ws = reference_sized_workspace(workdir)
    with_grid = models._inputs

    def without_grid(hidden, public):
        inputs = with_grid(hidden, public)
        inputs.pop(figure.GRID_SET)
        return inputs

    def timed(grid: bool):
        def once(_r: int) -> float:
            models._inputs = with_grid if grid else without_grid
            try:
                t0 = time.perf_counter()
                models.measure_models(assignment, ws)
                return time.perf_counter() - t0
            finally:
                models._inputs = with_grid

        return once

    models.measure_models(assignment, ws)  # warm: data sets, imports
    measured = interleaved(
        {"with_grid": timed(True), "without_grid": timed(False)},
        rounds,
        log=lambda m: print(m, file=sys.stderr),
        label="measure ",
    )
    runs: dict = {}
    facts = models.measure_models(assignment, ws, runs=runs)
    grid_cpu_ms = _grid_cpu_ms(ws, figure.grid_points(data.public_split()), rounds)
    section_s, svg_s, png_s = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        section = figure.figure_section(runs, facts, data.public_split())
        section_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        svg = draw.svg_inline(section)
        svg_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        png = draw.png_data_uri(section)
        png_s.append(time.perf_counter() - t0)
    return {
        "rounds": rounds,
        "measure_with_grid_s": spread(measured["with_grid"]),
        "measure_without_grid_s": spread(measured["without_grid"]),
        "added_s": spread(paired_diffs(measured["with_grid"], measured["without_grid"])),
        "ratio": spread(paired_ratios(measured["with_grid"], measured["without_grid"])),
        "grid_cpu_ms": grid_cpu_ms,
        "section_s": spread(section_s),
        "svg_s": spread(svg_s),
        "png_s": spread(png_s),
        "section_json_bytes": len(json.dumps(section)),
        "svg_bytes": len(svg),
        "png_data_uri_bytes": len(png),
    }


def _grid_cpu_ms(ws: Path, grid, rounds: int) -> dict:
    import onnxruntime as ort

    out = {}
    for path in sorted((ws / "artifacts").glob("*.onnx")):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        session.run(None, {"X": grid})
        times = []
        for _ in range(rounds):
            t0 = time.process_time()
            session.run(None, {"X": grid})
            times.append((time.process_time() - t0) * 1000)
        out[path.stem] = spread(times)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="autograder-bench-figure-") as tmp:
        result = run(args.rounds, Path(tmp))
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text)
    for key in ("measure_with_grid_s", "measure_without_grid_s", "added_s", "ratio", "section_s", "svg_s", "png_s"):
        print(
            f"{key:24s} median {result[key]['median']:.3f}  (min {result[key]['min']:.3f}, max {result[key]['max']:.3f})"
        )
    for name, ms in result["grid_cpu_ms"].items():
        print(f"grid on {name:16s} median {ms['median']:.1f} ms CPU")
    print(
        f"section {result['section_json_bytes']} B of JSON, SVG {result['svg_bytes']} B, "
        f"PNG data URI {result['png_data_uri_bytes']} B"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
