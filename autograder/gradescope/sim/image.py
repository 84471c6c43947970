"""The simulated Gradescope image: what ``grader.Dockerfile`` builds, made without Docker.

Like the Dockerfile, it unpacks the autograder zip to ``/autograder/source``, installs
``run_autograder`` at ``/autograder/run_autograder`` and runs ``setup.sh`` once as root, here in
a :mod:`container <autograder.gradescope.sim.container` with Docker's restrictions and no memory or
CPU limit (as ``docker build`` runs its steps). ``setup.sh`` gets ``--python /usr/bin/python3``:
uv's Python download is the one step that cannot run here (nothing but the package registries
can be reached), so Debian's Python of the pinned version stands in.

Two bases:

- ``host`` (default, quick): the container's system folders are the host's, read-only; the image
  is the two folders setup.sh writes, ``/opt/autograder`` and ``/autograder/source``. The system
  packages setup.sh needs must already be on the host (``make setup`` installs them), so it
  installs none.
- ``debian``: a fresh Debian root file system (:mod:`.rootfs`) in which setup.sh does everything
  it does on Gradescope: apt-get, uv, the venv, the users, the modes.

Images are cached under ``cache_dir/images/<key>`` and shared between processes with file locks;
the two newest are kept. The key hashes the base and what setup.sh is given: every entry of the zip
(name, mode, bytes) but the deployment's own, :data:`PER_DEPLOYMENT` (the hidden-data secret, which
every checkout makes anew, and the manifest's fingerprint of it), which setup.sh only leaves in
``/autograder/source``: each run's ``/autograder`` gets the current zip's (:func:`fresh_autograder_dir`),
so a fresh clone of the same tree reuses the image instead of running setup.sh again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import time
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ...errors import AutograderError
from ...hidden_secret import SECRET_FILE
from . import rootfs as rootfs_mod
from .container import ContainerSpec, run_container

DEFAULT_CACHE = Path("/var/cache/autograder/gradescope-sim")
SETUP_PYTHON = "/usr/bin/python3"  # the image's own Python of the pinned version
IMAGE_FORMAT = 2  # bump when the layout below or the key changes
MANIFEST = "gradescope.json"
# setup.sh reads neither (the manifest's fingerprint field aside) and only chmods them go-rwx
PER_DEPLOYMENT = (SECRET_FILE, MANIFEST)
MANIFEST_DEPLOYMENT_FIELDS = ("hidden_secret",)
KEEP_IMAGES = 2
SETUP_TIMEOUT_S = 1800
# The host's CA bundle, for setup.sh's downloads from the package registries (this workplace's
# egress presents its own certificate authority; on Gradescope nothing of this is needed).
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"


class ImageBuildError(AutograderError):
    """setup.sh failed while building the simulated image."""


@dataclass(frozen=True)
class Image:
    key: str
    folder: Path
    base: str  # host | debian
    zip_path: Path | None = None  # the zip asked for: its PER_DEPLOYMENT entries go into each run

    @property
    def opt(self) -> Path:  # /opt/autograder (base host)
        return self.folder / "opt-autograder"

    @property
    def source(self) -> Path:  # /autograder/source as setup.sh left it
        return self.folder / "autograder-source"

    @property
    def rootfs(self) -> Path | None:  # the whole root file system (base debian)
        return self.folder / "rootfs" if self.base == "debian" else None

    @property
    def setup_log(self) -> str:
        path = self.folder / "setup.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def container_spec(self, memory_mb: int | None, cpus: float | None) -> ContainerSpec:
        """A container of this image (``/autograder`` is bound per run by the caller)."""
        if self.rootfs is not None:
            return ContainerSpec(memory_mb=memory_mb, cpus=cpus, rootfs=self.rootfs)
        return ContainerSpec(memory_mb=memory_mb, cpus=cpus, binds=[(str(self.opt), "/opt/autograder", "ro")])


def image_key(zip_path: Path, base: str) -> str:
    """What the image is built from: the base, and the zip but its deployment's own entries."""
    h = hashlib.sha256(f"format {IMAGE_FORMAT} base {base} python {SETUP_PYTHON}\n".encode())
    with zipfile.ZipFile(zip_path) as zf:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            data = b"" if info.filename == SECRET_FILE else zf.read(info)
            if info.filename == MANIFEST:
                manifest = json.loads(data)
                for name in MANIFEST_DEPLOYMENT_FIELDS:
                    manifest.pop(name, None)
                data = json.dumps(manifest, sort_keys=True).encode()
            h.update(f"{info.filename}\0{info.external_attr >> 16:o}\0{len(data)}\0".encode() + data)
    return h.hexdigest()[:20]


def unpack_zip(zip_path: Path, target: Path) -> None:
    """Unpack the autograder zip with its mode bits (as Gradescope's unzip keeps them)."""
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():
            dest = (target / info.filename).resolve()
            if not dest.is_relative_to(target.resolve()):
                raise ImageBuildError(f"{zip_path}: entry {info.filename!r} points outside the folder")
            if info.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(zf.read(info))
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(dest, mode or 0o644)


@contextmanager
def _lock(path: Path, shared: bool = False, blocking: bool = True) -> Iterator[bool]:
    with open(path, "ab") as f:
        flags = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(f, flags)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def image_for(
    zip_path: Path,
    *,
    base: str = "host",
    cache_dir: Path = DEFAULT_CACHE,
    rebuild: bool = False,
    say: Callable[[str], None] | None = None,
) -> Iterator[Image]:
    """The image of ``zip_path``, built when not cached; held (not evicted) while in use. ``say``:
    told each step of a build as it happens (setup.sh's own lines), so a long build is never silent."""
    if base not in ("host", "debian"):
        raise ImageBuildError(f"unknown image base {base!r} (host or debian)")
    images = Path(cache_dir) / "images"
    images.mkdir(parents=True, exist_ok=True)
    os.chmod(cache_dir, 0o700)
    key = image_key(zip_path, base)
    image = Image(key, images / key, base, Path(zip_path))
    lock_path = images / f"{key}.lock"
    with open(lock_path, "ab") as lock:
        # shared while in use (others may use it too); exclusive only to build it
        fcntl.flock(lock, fcntl.LOCK_SH)
        if rebuild or not (image.folder / "image.json").is_file():
            fcntl.flock(lock, fcntl.LOCK_EX)
            if rebuild or not (image.folder / "image.json").is_file():
                if say is not None:
                    say(f"building the simulated image of {Path(zip_path).name} (once per zip; about 2 minutes)")
                _build(zip_path, image, Path(cache_dir), say)
                if say is not None:
                    say("image built")
            fcntl.flock(lock, fcntl.LOCK_SH)
        os.utime(image.folder)
        try:
            yield image
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    _evict(images)


def _build(zip_path: Path, image: Image, cache_dir: Path, say: Callable[[str], None] | None = None) -> None:
    if image.folder.exists():
        shutil.rmtree(image.folder)
    image.folder.mkdir(mode=0o700)
    started = time.monotonic()
    if image.rootfs is not None:
        tarball = rootfs_mod.debian_tarball(cache_dir / "rootfs")
        rootfs_mod.unpack(tarball, image.rootfs)
        rootfs_mod.separate_system_ids(image.rootfs)
        autograder = image.rootfs / "autograder"
        spec = ContainerSpec(
            memory_mb=None, cpus=None, rootfs=image.rootfs, binds=[(HOST_CA, "/run/host-ca.crt", "ro")]
        )
        # the host's CA bundle: this workplace's egress to the registries needs it; Gradescope does not
        env = {"SSL_CERT_FILE": "/run/host-ca.crt", "PIP_CERT": "/run/host-ca.crt"}
    else:
        autograder = image.folder / "autograder"
        image.opt.mkdir()
        os.chmod(image.opt, 0o755)
        spec = ContainerSpec(
            memory_mb=None,
            cpus=None,
            binds=[(str(image.opt), "/opt/autograder", "rw"), (str(autograder), "/autograder", "rw")],
        )
        env = {"SSL_CERT_FILE": HOST_CA}
    uv_cache = cache_dir / "uv-cache"
    uv_cache.mkdir(exist_ok=True)
    spec.binds.append((str(uv_cache), "/var/cache/autograder-uv", "rw"))
    env["UV_CACHE_DIR"] = "/var/cache/autograder-uv"
    unpack_zip(zip_path, autograder / "source")
    shutil.copy2(autograder / "source" / "run_autograder", autograder / "run_autograder")
    os.chmod(autograder / "run_autograder", 0o755)
    run = run_container(
        spec,
        ["/bin/bash", "/autograder/source/setup.sh", "--python", SETUP_PYTHON],
        env=env,
        cwd="/",
        timeout_s=SETUP_TIMEOUT_S,
        log_path=image.folder / "setup.log",
        on_line=None if say is None else lambda line: say(line) if line.startswith("setup.sh:") else None,
    )
    if run.returncode != 0 or run.timed_out:
        raise ImageBuildError(
            f"setup.sh failed in the simulated image (exit {run.returncode}"
            f"{', timed out' if run.timed_out else ''}):\n{run.log[-3000:]}"
        )
    if image.rootfs is None:
        shutil.move(str(autograder / "source"), image.source)
        shutil.move(str(autograder / "run_autograder"), image.folder / "run_autograder")
        shutil.rmtree(autograder)
    else:
        shutil.copytree(autograder / "source", image.source, symlinks=True)
        shutil.copy2(autograder / "run_autograder", image.folder / "run_autograder")
    (image.folder / "image.json").write_text(
        json.dumps(
            {
                "key": image.key,
                "base": image.base,
                "zip": str(zip_path),
                "built_s": round(time.monotonic() - started, 1),
                "setup_python": SETUP_PYTHON,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


def _evict(images: Path) -> None:
    """Remove all but the newest ``KEEP_IMAGES`` images that nobody is using."""
    found = sorted((p for p in images.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in found[KEEP_IMAGES:]:
        with _lock(images / f"{old.name}.lock", blocking=False) as free:
            if free:
                shutil.rmtree(old, ignore_errors=True)
    for lock in images.glob("*.lock"):  # the locks of images gone for a day
        if not (images / lock.stem).exists() and time.time() - lock.stat().st_mtime > 24 * 3600:
            lock.unlink(missing_ok=True)


def fresh_autograder_dir(image: Image, parent: Path) -> Path:
    """A per-run ``/autograder``: the image's source (with setup.sh's modes), run_autograder, and
    empty submission/ and results/ folders, as a new container of the image has them."""
    root = parent / "autograder"
    root.mkdir()
    os.chmod(root, 0o755)
    shutil.copytree(image.source, root / "source", symlinks=True)
    shutil.copystat(image.source, root / "source")
    if image.zip_path is not None:  # this deployment's own, as setup.sh leaves them (go-rwx)
        with zipfile.ZipFile(image.zip_path) as zf:
            for name in PER_DEPLOYMENT:
                info = zf.getinfo(name)
                target = root / "source" / name
                target.unlink(missing_ok=True)
                target.write_bytes(zf.read(info))
                os.chmod(target, ((info.external_attr >> 16) & 0o777 or 0o644) & ~0o077)
    shutil.copy2(image.folder / "run_autograder", root / "run_autograder")
    for name in ("submission", "results"):
        (root / name).mkdir()
        os.chmod(root / name, 0o755)
    return root


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)
