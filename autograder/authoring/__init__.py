"""Authoring front end for course staff: ``build.py`` makes the student notebook and the examples
from the master, ``calibrate.py`` derives the tolerances from runs of the reference solution."""
