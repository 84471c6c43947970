"""The instructor's Gradescope simulator (``autograder gradescope simulate``): Gradescope's
container without Docker (:mod:`.container` + :mod:`.container_init` + :mod:`.docker_profile` +
:mod:`.cgroups`), the zip's image (:mod:`.image` runs setup.sh, :mod:`.rootfs` makes a fresh
Debian) and one submission graded there (:mod:`.simulate`).

An instructor's tool: the wheel in the Gradescope zip leaves this package out
(:data:`autograder.gradescope.build.INSTRUCTOR_ONLY`), and nothing ``run_autograder`` runs may
import it.
"""
