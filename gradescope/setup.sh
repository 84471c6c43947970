#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (Ubuntu 22.04 base).
#
# The base image's Python is 3.10, for which the pinned onnxruntime does not exist (the newest
# 3.10 wheel is older and quantizes differently), so this provisions, with uv, the Python the zip
# was built and tested with (gradescope.json: "python") into /opt/autograder, and installs the
# grader there with exactly the pins of constraints.txt. The jail needs bubblewrap and setpriv
# (util-linux) and unprivileged users to run notebooks as; none of them may read the grader's
# files in /autograder/source.
#
# Not verified by the project's tests (they cannot build images): the uv download of Python,
# and Ubuntu 22.04's package names. Verified: shellcheck, and everything after provisioning via
# run_autograder on a simulated /autograder.
set -euo pipefail
cd /    # no project or venv of the current folder may steer uv

SOURCE=/autograder/source
PREFIX=/opt/autograder
VENV="$PREFIX/venv"
UV_VERSION=0.13.9          # the tool that provisions Python; pinned like everything else
SANDBOX_SLOTS=4            # users autograder-sb0 .. autograder-sb3 (one per parallel submission)

log() { printf 'setup.sh: %s\n' "$*"; }

log "system packages: bubblewrap, util-linux (setpriv), pip"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  bubblewrap util-linux passwd ca-certificates python3 python3-pip >/dev/null

PYTHON_VERSION=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["python"])' \
  "$SOURCE/gradescope.json")
WHEEL="$SOURCE/$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["wheel"])' \
  "$SOURCE/gradescope.json")"

log "uv $UV_VERSION, then Python $PYTHON_VERSION under $PREFIX/python"
mkdir -p "$PREFIX"
python3 -m pip install --quiet --no-cache-dir --target "$PREFIX/uv" "uv==$UV_VERSION"
UV="$PREFIX/uv/bin/uv"
export UV_PYTHON_INSTALL_DIR="$PREFIX/python" UV_CACHE_DIR="$PREFIX/uv-cache" UV_NO_CONFIG=1
"$UV" python install --no-bin "$PYTHON_VERSION"

log "venv $VENV with $(basename "$WHEEL") and the pins of constraints.txt"
"$UV" venv --no-project --managed-python --seed --python "$PYTHON_VERSION" "$VENV"
"$VENV/bin/python" -m pip install --quiet --no-cache-dir -c "$SOURCE/constraints.txt" "$WHEEL"
"$VENV/bin/autograder" --version
"$VENV/bin/python" -c 'import onnxruntime, onnx, nbclient, ipykernel; print("onnxruntime", onnxruntime.__version__)'
rm -rf "$UV_CACHE_DIR" "$PREFIX/uv"

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
