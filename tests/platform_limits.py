"""The one list of reasons a test may skip in CI: limits of the machine the suite runs on, which no
setup step of this project can lift (tests/strict_skips.py fails a CI session on any other skip).

Each entry is a regular expression matched (``re.search``) against the skip's reason, and why it is
a real platform limit. Not here, on purpose: a missing package that ``make setup`` installs
(chromium, mmdebstrap, bubblewrap), a non-root grader (CI runs as root: a root test that skips there
means CI stopped testing the jail), a fallback jail that cannot start a kernel (the sandbox uid must
be able to run the grader's interpreter everywhere CI runs), a race a test sidesteps (a reused pid, a
busy slot: rare, and a skip that hides one should be seen), an assignment file not built yet.
Keep it short: every entry is a part of the product CI does not test on such a machine.
"""

from __future__ import annotations

import re

LIMITS: dict[str, str] = {
    r"this CPU's int8 products are exact \(VNNI\)": (
        "the CPU has VNNI: ONNX Runtime's int8 kernels never saturate on it, so the saturation the "
        "grader works around cannot be shown (tests/measure/test_ort_platform.py)"
    ),
    r"not an x86 CPU with AVX2": "ONNX Runtime's x86 int8 kernels exist only on x86 with AVX2",
    r"no syscall table for this machine": "the seccomp filter lists syscalls for x86_64 and aarch64 only",
    r"Landlock is not available on this kernel": "Landlock is a Linux >= 5.13 feature the host kernel may lack",
}

PATTERNS = [(re.compile(pattern), why) for pattern, why in LIMITS.items()]


def platform_limit(reason: str) -> str | None:
    """Why ``reason`` is a declared platform limit (None: it is not one)."""
    return next((why for pattern, why in PATTERNS if pattern.search(reason)), None)
