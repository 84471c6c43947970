"""Fixtures of the Gradescope tests: the autograder zip (built once) and a world-traversable tmp."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from gradescope_testlib import ASSIGNMENT
from needs import needs


@pytest.fixture(scope="session")
def gradescope_zip(tmp_path_factory) -> Path:
    """The real project's autograder zip, built once per session (per xdist worker)."""
    from autograder.gradescope.build import build_zip

    return build_zip(ASSIGNMENT, tmp_path_factory.mktemp("gradescope-zip") / "autograder.zip").zip_path


@pytest.fixture
def world_readable_tmp():
    """A folder every user may traverse, as / is on Gradescope (pytest's own tmp is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="autograder-gs-test-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
@needs("container")
def gradescope_image(gradescope_zip):
    """The simulated Gradescope image of the real zip (setup.sh run once in the container, cached
    by the zip's hash across runs and xdist workers), held for the session."""
    from container_testlib import require_container

    require_container()
    from autograder.gradescope.sim.image import image_for

    with image_for(gradescope_zip, base="host") as image:
        yield image
