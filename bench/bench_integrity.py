"""The integrity report's pairwise work for a class of 100, 250 and 500 notebooks (no execution).

    .venv/bin/python bench/bench_integrity.py            # 100, 250, 500 notebooks, 3 rounds each
    .venv/bin/python bench/bench_integrity.py --sizes 500 --rounds 5

The class is made from lesson 07's two independently written solutions (the reference and
tests/integrity/second_solution.ipynb) as a class following one template would be: each notebook
is one of the two with every name it binds renamed (its own seed), comments replaced, one of the
examples' changed cells swapped in, and a cell of its own. So nearly every pair of the same base
passes the screen and is compared token by token: the hard case, not the easy one.

Figures: the median over rounds of the whole ``integrity_report`` (fingerprints, screen,
comparisons, highlights), with the number of pairs compared in full, and the ratio of the largest
class to the smallest against the ratio of their pair counts (quadratic work shows as equal ratios).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integrity"))


def make_class(folder: Path, n: int, seed: int = 0) -> dict[str, Path]:
    from test_integrity_report import SECOND, disguise  # the disguise the tests flag

    from autograder.assignment import load_assignment

    a = load_assignment("07-quantization")
    bases = [json.loads((a.reference_folder / "solution.ipynb").read_text()), json.loads(SECOND.read_text())]
    swaps = []
    for example in sorted((a.folder / "examples").glob("*.ipynb")):
        for index, cell in enumerate(json.loads(example.read_text())["cells"]):
            if (
                cell["cell_type"] == "code"
                and index < len(bases[0]["cells"])
                and "".join(cell["source"]) != "".join(bases[0]["cells"][index]["source"])
            ):
                swaps.append((index, "".join(cell["source"])))
    rng = random.Random(seed)
    notebooks = {}
    for i in range(n):
        nb = json.loads(json.dumps(bases[i % 2]))
        if swaps and rng.random() < 0.7:
            index, source = rng.choice(swaps)
            nb["cells"][index]["source"] = source
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                cell["source"] = disguise("".join(cell["source"])).replace("_v2", f"_{i}")
        own = "\n".join(
            f"extra_{i}_{k} = [v ** {rng.randint(2, 9)} for v in range({rng.randint(5, 500)})]\n"
            f"print(sum(extra_{i}_{k}) % {rng.randint(3, 97)}, len(extra_{i}_{k}))"
            for k in range(4)
        )
        nb["cells"].append({"cell_type": "code", "metadata": {}, "source": own, "outputs": [], "execution_count": None})
        path = folder / f"student_{i:03d}.ipynb"
        path.write_text(json.dumps(nb))
        notebooks[path.stem] = path
    return notebooks


def measure(notebooks: dict[str, Path], rounds: int) -> dict[str, float]:
    from autograder.assignment import load_assignment
    from autograder.report.integrity import integrity_report

    a = load_assignment("07-quantization")
    times, pair_times, report = [], [], None
    for _ in range(rounds):
        started = time.perf_counter()
        report = integrity_report(notebooks, a)
        times.append(time.perf_counter() - started)
        pair_times.append(report.seconds["pairs"])
    assert report is not None
    return {
        "n": len(notebooks),
        "pairs": report.pairs_screened,
        "median_s": statistics.median(times),
        "pairs_s": statistics.median(pair_times),
        "flagged": report.flagged_total,
        "compared": report.compared,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100,250,500")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-integrity-") as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            folder = Path(tmp) / str(n)
            folder.mkdir()
            rows.append(measure(make_class(folder, n), args.rounds))
            r = rows[-1]
            print(
                f"{r['n']:>4} notebooks · {r['pairs']:>7,} pairs · median {r['median_s']:6.2f} s in all, "
                f"{r['pairs_s']:6.2f} s of it pairwise (screen, comparisons, highlights), over {args.rounds} "
                f"rounds · {r['flagged']:,} pairs flagged",
                flush=True,
            )
    if len(rows) > 1:
        small, large = rows[0], rows[-1]
        print(
            f"time ratio {large['median_s'] / small['median_s']:.1f}× in all, "
            f"{large['pairs_s'] / max(1e-9, small['pairs_s']):.1f}× pairwise, for a pair-count ratio "
            f"{large['pairs'] / max(1, small['pairs']):.1f}× ({small['n']} → {large['n']} notebooks)"
        )


if __name__ == "__main__":
    main()
