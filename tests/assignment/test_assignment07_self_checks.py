"""Lesson 07's public self-checks quote the grader's published tolerances.

The public tests quote three published tolerances (calibration coverage, the two size ratios; the
latency window has no public test, since its part is shown and not scored); this fast test keeps
those numbers equal to reference/07-quantization/tolerances.toml.
That the self-checks and the grader agree on every example, for every assignment, is
tests/assignment/test_assignment_self_checks.py.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MASTER = ROOT / "reference" / "07-quantization" / "master.ipynb"
TOLERANCES = tomllib.loads((ROOT / "reference" / "07-quantization" / "tolerances.toml").read_text())
PUBLISHED = {  # the tolerance each public test quotes, and how the test writes it
    "static_model.calibration_coverage_min": r"_covered >= ([0-9.]+)",
    "size.dynamic_ratio_max": r'_ratios\["int8_dynamic"\] <= ([0-9.]+)',
    "size.static_ratio_max": r'_ratios\["int8_qdq"\] <= ([0-9.]+)',
}


def _value(key: str) -> float:
    section, name = key.split(".")
    entry = TOLERANCES[section][name]
    return float(entry["value"] if isinstance(entry, dict) else entry)


def test_public_tests_quote_the_published_tolerances():
    source = "\n".join("".join(c["source"]) for c in json.loads(MASTER.read_text())["cells"])
    for key, pattern in PUBLISHED.items():
        quoted = re.findall(pattern, source)
        assert quoted, f"no public test quotes {key}"
        assert {float(q) for q in quoted} == {_value(key)}, (
            f"{key}: the master quotes {quoted}, tolerances.toml has {_value(key)}"
        )
