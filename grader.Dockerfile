# The Gradescope grading image for "Manual Docker Configuration" (or to run the grader locally the
# way Gradescope does). It is the autograder zip installed exactly as Gradescope's zip upload
# would: unpacked to /autograder/source, run_autograder at /autograder/run_autograder, setup.sh run
# once as root.
#
#   autograder gradescope build 07-quantization -o dist/autograder.zip
#   docker build -f grader.Dockerfile -t ort-course/grader-07 dist/
#
# The build context is the folder holding the zip (dist/ above), so nothing else of the checkout
# is sent. Base: Gradescope's Ubuntu 22.04 image, the default of its zip upload.
#
# Without Docker, `autograder gradescope simulate ZIP NOTEBOOK` builds the same image (these steps,
# with `setup.sh --python /usr/bin/python3` in place of uv's Python download) and runs
# run_autograder in a container with Docker's default capabilities, seccomp profile and limits.
FROM gradescope/autograder-base:ubuntu-22.04

ARG AUTOGRADER_ZIP=autograder.zip
COPY ${AUTOGRADER_ZIP} /tmp/autograder.zip

# python3 (3.10) ships with the base image; its zipfile module unpacks without needing unzip.
# setup.sh provisions the pinned Python and environment under /opt/autograder, then closes
# /autograder/source to everyone but root, so run_autograder is installed before it runs.
RUN python3 -m zipfile -e /tmp/autograder.zip /autograder/source \
 && rm /tmp/autograder.zip \
 && install -m 0755 /autograder/source/run_autograder /autograder/run_autograder \
 && bash /autograder/source/setup.sh \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /tmp/* /var/tmp/*

WORKDIR /autograder
# The base image defines the entrypoint Gradescope's harness uses; it is not redefined here.
