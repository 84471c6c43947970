"""``autograder gradescope simulate ZIP SUBMISSION``: grade one submission as Gradescope would.

The zip's image (:mod:`.image`: setup.sh run once, cached) and a fresh container of it per
submission (:mod:`.container`): root with Docker's capabilities and seccomp profile, a memory
and CPU cgroup (Gradescope's defaults: 768 MB, 0.5 CPU), ``/autograder`` laid out as Gradescope
lays it out, and ``/autograder/run_autograder`` started with no variable that steers the
grader. The container is killed at the autograder timeout, as Gradescope kills it.

What comes back: results.json as the student would get it, run_autograder's output (what
instructors see), the wall time and the cgroup's figures (peak memory of the whole tree, OOM
kills, CPU time).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ...errors import AutograderError
from ...tree_walk import remove_tree  # the container's files: what run_autograder left
from .cgroups import CgroupStats
from .container import STATE_PARENT, run_container
from .image import DEFAULT_CACHE, Image, fresh_autograder_dir, image_for

GRADESCOPE_MEMORY_MB = 768  # Gradescope's defaults for an autograder
GRADESCOPE_CPUS = 0.5
GRADESCOPE_TIMEOUT_S = 600


@dataclass
class Simulation:
    results: dict[str, Any] | None  # None: no valid results.json (what Gradescope calls a failed run)
    stdout: str  # run_autograder's output: what instructors see
    returncode: int
    timed_out: bool
    wall_s: float
    stats: CgroupStats
    image: str

    def summary(self) -> dict[str, Any]:
        r = self.results or {}
        execution = (r.get("extra_data") or {}).get("execution") or {}
        return {
            "score": r.get("score"),
            "wall_s": round(self.wall_s, 1),
            "exit": self.returncode,
            "timed_out": self.timed_out,
            "status": execution.get("status"),
            "isolation": ((r.get("extra_data") or {}).get("isolation") or {}).get("mode"),
            **self.stats.as_dict(),
        }


def _place_submission(submission: Path, target: Path) -> None:
    """A notebook file, or a folder of files, becomes ``/autograder/submission``'s content."""
    submission = Path(submission)
    if submission.is_dir():
        shutil.copytree(submission, target, dirs_exist_ok=True, symlinks=True)
    elif submission.is_file():
        shutil.copy2(submission, target / submission.name)
    else:
        raise AutograderError(f"{submission}: no such notebook or folder")


def run_in_image(
    image: Image,
    submission: Path,
    *,
    memory_mb: int | None = GRADESCOPE_MEMORY_MB,
    cpus: float | None = GRADESCOPE_CPUS,
    timeout_s: float | None = GRADESCOPE_TIMEOUT_S,
    metadata: dict | None = None,
    inspect: Callable[[Path], None] | None = None,
    env: dict[str, str] | None = None,
) -> Simulation:
    """One submission in a fresh container of ``image``. ``inspect(root)`` may look at the
    run's ``/autograder`` folder (as the host sees it) before it is removed; ``env`` adds
    variables (tests plant canaries with it)."""
    work = Path(tempfile.mkdtemp(prefix="autograder-simulate-", dir=STATE_PARENT))
    try:
        root = fresh_autograder_dir(image, work)
        _place_submission(submission, root / "submission")
        (root / "submission_metadata.json").write_text(json.dumps(metadata or {"id": 1}), encoding="utf-8")
        spec = image.container_spec(memory_mb, cpus)
        spec.binds.append((str(root), "/autograder", "rw"))
        run = run_container(spec, ["/autograder/run_autograder"], cwd="/autograder", timeout_s=timeout_s, env=env)
        results_file = root / "results" / "results.json"
        try:
            results = json.loads(results_file.read_text()) if results_file.is_file() else None
        except ValueError:
            results = None
        if inspect is not None:
            inspect(root)
        return Simulation(
            results=results,
            stdout=run.log,
            returncode=run.returncode,
            timed_out=run.timed_out,
            wall_s=run.wall_s,
            stats=run.stats,
            image=image.key,
        )
    finally:
        remove_tree(work, ignore_errors=True)


def simulate(
    zip_path: Path,
    submission: Path,
    *,
    memory_mb: int | None = GRADESCOPE_MEMORY_MB,
    cpus: float | None = GRADESCOPE_CPUS,
    timeout_s: float | None = GRADESCOPE_TIMEOUT_S,
    base: str = "host",
    cache_dir: Path = DEFAULT_CACHE,
    rebuild: bool = False,
    say: Callable[[str], None] | None = None,
) -> Simulation:
    """Build (or reuse) the zip's image, then grade ``submission`` in a container of it; ``say`` is
    told the build's steps as they happen."""
    with image_for(Path(zip_path), base=base, cache_dir=cache_dir, rebuild=rebuild, say=say) as image:
        return run_in_image(image, submission, memory_mb=memory_mb, cpus=cpus, timeout_s=timeout_s)
