"""Benchmarks of the autograder: overhead vs bare execution, batches vs otter-grader, rescoring, memory."""
