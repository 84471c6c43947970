"""autograder: the tamper-proof grading harness of "ONNX Runtime for Engineers".

Untrusted code makes data, trusted code makes judgments: execute (jailed) -> measure -> judge
-> report. See docs/ARCHITECTURE.md for the file contracts between the stages.
"""

__version__ = "0.1.0"
