"""Which modules a kernel template imports: those of the lesson's import-only cells, and ipykernel's."""

from __future__ import annotations

import pytest

from autograder.kernel_template.template import KERNEL_MODULES, import_only_modules

CASES = [
    (["import numpy as np\nimport onnx"], ["numpy", "onnx"]),
    (["from sklearn.datasets import make_moons\nfrom skl2onnx import to_onnx"], ["sklearn.datasets", "skl2onnx"]),
    (['"""The imports."""\n# numpy first\nimport numpy'], ["numpy"]),  # a docstring and comments may stand beside
    (["import numpy\nx = 1"], []),  # a cell that does more than import is the notebook's work, not the template's
    (["import os\nos.system('id')"], []),
    (["from . import helper\nfrom .pkg import thing"], []),  # relative: not a module of the environment
    (["def f(:"], []),  # not Python: nothing
    ([""], []),
    (["import numpy", "import numpy\nimport onnx"], ["numpy", "onnx"]),  # each module once, first order kept
    (["import a.b.c, d"], ["a.b.c", "d"]),
]


@pytest.mark.parametrize(("sources", "expected"), CASES)
def test_import_only_cells_name_the_template_modules(sources, expected):
    assert import_only_modules(sources) == [*expected, *KERNEL_MODULES]


def test_the_kernel_app_is_always_imported():
    assert import_only_modules([]) == list(KERNEL_MODULES)
    assert KERNEL_MODULES[0] == "ipykernel.kernelapp"
