"""Where the project's files are: the root holding ``assignments/`` and ``reference/``.

The project root is ``$AUTOGRADER_ROOT`` when set (on Gradescope, the unpacked zip), else the
checkout this package lives in (when it has an ``assignments/`` folder), else the working
directory. The assignments (:mod:`autograder.assignment`) and the deployment's hidden-data secret
(:mod:`autograder.hidden_secret`) are found from it.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    env = os.environ.get("AUTOGRADER_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parent.parent
    if (here / "assignments").is_dir():
        return here
    return Path.cwd()
