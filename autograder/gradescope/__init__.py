"""Gradescope front end: ``build.py`` makes the autograder zip, ``run.py`` is what
``run_autograder`` calls for one submission on Gradescope."""
