"""A slot's kernel template over its life: started once, restarted once, then fresh kernels (unit
tests: a small stand-in for the template process; the real one is in tests/batch/test_batch_template.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from autograder.kernel_template import template, template_slot


class FakeTemplate:
    """Stands in for :class:`KernelTemplate`: records starts and stops; ``fail`` makes start raise."""

    made: list[FakeTemplate] = []
    fail = False

    def __init__(self, folder, modules):
        self.modules, self.running, self.stopped = modules, False, False
        FakeTemplate.made.append(self)

    def start(self):
        if FakeTemplate.fail:
            raise RuntimeError("the kernel template did not start: boom")
        self.running = True
        return self

    def alive(self):
        return self.running

    def stop(self):
        self.running, self.stopped = False, True


@pytest.fixture
def fake(monkeypatch):
    FakeTemplate.made, FakeTemplate.fail = [], False
    monkeypatch.setattr(template_slot, "KernelTemplate", FakeTemplate)
    return FakeTemplate


def _slot(tmp_path):
    return template_slot.SlotTemplate(0, "07", ["json"], tmp_path / "tpl")


# what happens to the template before each acquire: "" nothing, "die" it dies; expected: template or fresh
LIVES = [
    ([""] * 3, ["template"] * 3, 1),
    (["", "die", ""], ["template"] * 3, 2),
    (["", "die", "die", ""], ["template", "template", "fresh", "fresh"], 2),
    (["", "die", "", "", "die", ""], ["template"] * 4 + ["fresh", "fresh"], 2),
]


@pytest.mark.parametrize(("events", "kernels", "starts"), LIVES)
def test_a_template_is_started_once_restarted_once_then_given_up(fake, tmp_path, events, kernels, starts):
    slot = _slot(tmp_path)
    got = []
    for event in events:
        if event == "die" and slot.template is not None:
            slot.template.running = False
        t, why = slot.acquire()
        got.append("template" if t is not None else "fresh")
        assert (t is None) == (why is not None)
        if t is None:
            assert "died 2 times" in why
    assert (got, slot.starts, len(fake.made)) == (kernels, starts, starts)
    assert all(t.stopped for t in fake.made[:-1]), "a dead template is reaped before the next starts"
    slot.close()
    assert all(not t.running for t in fake.made) and not (tmp_path / "tpl").exists()


def test_a_template_that_cannot_start_means_fresh_kernels_with_the_reason(fake, tmp_path):
    fake.fail = True
    slot = _slot(tmp_path)
    for _ in range(3):
        t, why = slot.acquire()
        assert t is None and "could not be started" in why and "boom" in why
    assert slot.starts == 1, "a failed start is not retried for every submission"


def _notebook(path, cells):
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def test_a_lessons_modules_come_from_its_own_notebooks_import_cells(tmp_path):
    student = _notebook(
        tmp_path / "lesson.ipynb",
        [
            {"cell_type": "markdown", "source": "import os"},
            {"cell_type": "code", "source": ["import numpy as np\n", "import onnx"]},
            {"cell_type": "code", "source": "import json\nx = 1"},  # not import-only
        ],
    )
    solution = _notebook(tmp_path / "solution.ipynb", [{"cell_type": "code", "source": "from onnx import helper"}])
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    modules = template_slot.lesson_modules([student, solution, broken, tmp_path / "missing.ipynb"])
    assert modules == ["numpy", "onnx", *template.KERNEL_MODULES]


def test_a_run_asks_for_a_template_only_when_told_or_forced(fake, tmp_path, monkeypatch):
    (tmp_path / "a.ipynb").write_text(json.dumps({"cells": []}))
    lesson = SimpleNamespace(id="07", notebook=tmp_path / "a.ipynb", reference_folder=tmp_path)
    monkeypatch.delenv(template.SWITCH, raising=False)
    try:
        assert template_slot.for_run(3, lesson, False) is None
        one = template_slot.for_run(3, lesson, True)
        assert one is template_slot.for_run(3, lesson, True), "one template per (slot, lesson)"
        assert template_slot.for_run(4, lesson, True) is not one
        other = SimpleNamespace(id="05", notebook=lesson.notebook, reference_folder=tmp_path)
        assert template_slot.for_run(3, other, True) is not one
        monkeypatch.setenv(template.SWITCH, "1")
        assert template_slot.for_run(3, lesson, False) is one
        assert fake.made == [], "nothing is started before a run asks"
    finally:
        template_slot.close_all()
