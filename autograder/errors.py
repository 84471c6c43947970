"""The harness's own error types.

A student's bug never raises out of the grader: it becomes data (a recorded error, a zero with a
reason). These exceptions are for the harness itself and for bad instructor input, and they fail
loudly.
"""


class AutograderError(Exception):
    """A bug or misconfiguration of the harness itself."""


class AssignmentError(AutograderError):
    """An assignment folder is missing or malformed (rubric, tolerances, assignment.toml)."""


class UnsafeFileError(Exception):
    """A submission file is not a plain regular file inside its folder, or is too large.

    Raised by autograder.safe_files while reading untrusted files; callers turn it into a
    measurement error ("artifacts/fp32.onnx is a symlink"), never into a crash.
    """


class SandboxUnavailableError(AutograderError):
    """No isolation layer is available and --unsafe-no-sandbox was not given."""
