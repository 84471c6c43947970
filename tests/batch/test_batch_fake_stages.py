"""The batch tests' stand-in for ``pipeline.execute_and_measure`` takes exactly what the real one takes.

Every batch, CLI-signal and summary test grades through ``batchkit.fake_stages``; a keyword the
pipeline starts passing (``pictures``, ``kernel_template``) that the stand-in does not know turns
every such grade into a ``grader_error`` and fails dozens of tests far from the cause. This test
names the cause instead.
"""

from __future__ import annotations

import inspect

import batchkit

from autograder import pipeline


def _shape(fn) -> list[tuple[str, object, bool]]:
    return [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in inspect.signature(fn).parameters.values()]


def test_the_stand_in_takes_the_same_parameters_as_the_pipeline(tmp_path):
    fake = batchkit.fake_stages(tmp_path / "log")
    assert _shape(fake) == _shape(pipeline.execute_and_measure)
