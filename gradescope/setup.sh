#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (Ubuntu 22.04 base).
#
#   setup.sh                    provision the zip's Python with uv (Gradescope)
#   setup.sh --python PATH      use PATH, an interpreter of that same version, instead of
#                               downloading one (a base image that has it; a local rehearsal)
#
# The base image's Python is 3.10, for which the pinned onnxruntime does not exist (the newest
# 3.10 wheel is older and quantizes differently), so by default this provisions, with uv, the
# Python the zip was built and tested with (gradescope.json: "python") into /opt/autograder, and
# installs the grader there with exactly the pins of constraints.txt. The jail needs bubblewrap
# and setpriv (util-linux) and unprivileged users to run notebooks as; none of them may read the
# grader's files in /autograder/source.
#
# Verified by the project's tests (tests/gradescope/test_gradescope_setup_rootfs.py): a run with
# --python in a fresh Debian root file system inside a Docker-like container, then the users,
# modes and venv. Not verified there: uv's Python download (no download outside the package
# registries on the development machines) and Ubuntu 22.04's package names.
set -euo pipefail
cd /    # no project or venv of the current folder may steer uv

SOURCE=/autograder/source
PREFIX=/opt/autograder
VENV="$PREFIX/venv"        # the interpreter and libraries: the jailed kernel runs it too
GRADER="$PREFIX/grader"    # the autograder package, on the grader's PYTHONPATH only
UV_VERSION=0.13.9          # the tool that provisions Python; pinned like everything else
SANDBOX_SLOTS=4            # users autograder-sb0 .. autograder-sb3 (one per parallel submission)
PYTHON=""                  # --python: an existing interpreter instead of uv's download

log() { printf 'setup.sh: %s\n' "$*"; }
die() { printf 'setup.sh: error: %s\n' "$*" >&2; exit 1; }

while (($#)); do
  case "$1" in
    --python) [[ $# -ge 2 ]] || die "--python needs a path"; PYTHON="$2"; shift 2 ;;
    --python=*) PYTHON="${1#--python=}"; shift ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

manifest() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$SOURCE/gradescope.json" "$1"
}

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
command -v useradd >/dev/null 2>&1 || missing+=(passwd)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
[[ -e /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
if ((${#missing[@]})); then
  log "system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "system packages: bubblewrap, util-linux, passwd, python3, pip already there"
fi

PYTHON_VERSION=$(manifest python)
WHEEL="$SOURCE/$(manifest wheel)"
if [[ -n "$PYTHON" ]]; then
  [[ -x "$PYTHON" ]] || die "--python $PYTHON is not an executable"
  found=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  [[ "$found" == "$PYTHON_VERSION" ]] \
    || die "--python $PYTHON is Python $found; the zip was built and pinned with $PYTHON_VERSION"
fi

log "uv $UV_VERSION"
mkdir -p "$PREFIX"
python3 -m pip install --quiet --no-cache-dir --target "$PREFIX/uv" "uv==$UV_VERSION"
UV="$PREFIX/uv/bin/uv"
OWN_CACHE=0
if [[ -z "${UV_CACHE_DIR:-}" ]]; then
  UV_CACHE_DIR="$PREFIX/uv-cache"   # removed at the end; a rehearsal may pass its own to keep
  OWN_CACHE=1
fi
export UV_PYTHON_INSTALL_DIR="$PREFIX/python" UV_CACHE_DIR UV_NO_CONFIG=1

if [[ -n "$PYTHON" ]]; then
  log "Python $PYTHON_VERSION: $PYTHON ($("$PYTHON" -c 'import sys; print(sys.version.split()[0])')), not downloaded"
  "$UV" venv --no-project --seed --python "$PYTHON" "$VENV"
else
  log "Python $PYTHON_VERSION under $PREFIX/python (uv's download)"
  "$UV" python install --no-bin "$PYTHON_VERSION"
  "$UV" venv --no-project --managed-python --seed --python "$PYTHON_VERSION" "$VENV"
fi

log "venv $VENV with the dependencies of $(basename "$WHEEL"), pinned by constraints.txt"
"$UV" pip install --quiet --compile-bytecode --python "$VENV/bin/python" -c "$SOURCE/constraints.txt" "$WHEEL"
# The grader's own package lives beside the venv, not in it: the venv is what the jailed kernel
# may read (its interpreter), and the grader's code has no business there.
log "grader package in $GRADER (outside the kernel's view)"
"$UV" pip uninstall --quiet --python "$VENV/bin/python" autograder
"$UV" pip install --quiet --compile-bytecode --no-deps --python "$VENV/bin/python" --target "$GRADER" "$WHEEL"
PYTHONPATH="$GRADER" "$VENV/bin/python" -P -m autograder.cli --version
! "$VENV/bin/python" -P -c 'import autograder' 2>/dev/null || die "the grader is still importable from the venv"
"$VENV/bin/python" -c 'import onnxruntime, onnx, nbclient, ipykernel; print("onnxruntime", onnxruntime.__version__)'
if ((OWN_CACHE)); then rm -rf "$UV_CACHE_DIR"; fi
rm -rf "$PREFIX/uv"

log "sandbox users autograder-sb0..$((SANDBOX_SLOTS - 1))"
for ((i = 0; i < SANDBOX_SLOTS; i++)); do
  user="autograder-sb$i"
  if ! id -u "$user" >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$user"
  fi
done

log "permissions: the environment readable by all, the grader's files by root only"
chmod -R a+rX,go-w "$PREFIX"
chown -R root:root /autograder/source
chmod -R go-rwx /autograder/source
log "done"
