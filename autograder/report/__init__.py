"""Stage 4 · report: grade.json → results.json (Gradescope), feedback.md, console tables.

The console tables (rich) live in ``autograder.report.console``; gradebook and summary pages
are separate modules of this package.
"""

from .feedback import failure_feedback_markdown, feedback_markdown
from .gradescope_results import failure_results_json, results_json

__all__ = [
    "failure_feedback_markdown",
    "failure_results_json",
    "feedback_markdown",
    "results_json",
]
