"""``make test-stress``: the suite on an overloaded machine.

Runs pytest with more workers than cores (``-n 4`` by default, whatever it is given) beside
``--hogs`` CPU hogs (default: one per core), each a child of this script bounded by
``--hog-seconds`` and stopped by its process id when pytest ends. A test that
asserts which limit fires must set its other limits so that the tested one still fires first.

    .venv/bin/python tests/stress.py [--hogs N] [--hog-seconds S] [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def main(argv: list[str]) -> int:
    cut = argv.index("--") if "--" in argv else len(argv)
    own, rest = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--hogs",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="CPU hogs beside the suite (default: one per core)",
    )
    parser.add_argument("--hog-seconds", type=float, default=3600.0, help="each hog's own time bound")
    args = parser.parse_args(own)
    pytest_args = rest or ["-n", "4", "--dist", "loadgroup", "-q"]
    hogs = [
        subprocess.Popen([sys.executable, "-c", HOG.format(seconds=args.hog_seconds)]) for _ in range(max(0, args.hogs))
    ]
    try:
        return subprocess.call([sys.executable, "-m", "pytest", *pytest_args])
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
