"""What one guess costs a brute force of lesson 07's hidden split, before and after the secret.

    .venv/bin/python bench/bench_hidden_secret.py            # 300 guesses per attack, 5 rounds
    .venv/bin/python bench/bench_hidden_secret.py --guesses 1000 --rounds 3

The attacker holds one leaked hidden value (``X_test[0]`` to 1e-6) and tries candidates until the
recipe reproduces it. Three costs per guess, each the median over rounds:

- ``seed``: the old recipe, a 32-bit seed (``make_moons`` + ``train_test_split`` + compare);
- ``secret``: the new recipe, one candidate secret (HMAC-SHA256 of the stream name, a 256-bit
  ``SeedSequence``, ``RandomState(MT19937)``, ``make_moons`` + split + compare);
- ``generator only``: just deriving the stream's ``RandomState`` from a candidate, a floor for any
  cleverer check of a guess.

It prints the expected time of a search over half of 2^32 seeds and of 2^128 secrets at those
costs, on one core and on a million cores. SECURITY.md ("Hidden data") quotes the figures.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

YEAR = 365.25 * 24 * 3600


def _per_guess(fn, guesses: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(guesses):
            fn(i)
        times.append((time.perf_counter() - start) / guesses)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--guesses", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import numpy as np
    from sklearn.datasets import make_moons
    from sklearn.model_selection import train_test_split

    from autograder.hidden_secret import HiddenSecret

    stream = "07-quantization/hidden-split"
    leaked = np.float32(0.123456)  # what a leak gives: one value, compared as the attack would

    def recipe(random_state) -> bool:
        X, y = make_moons(n_samples=2000, noise=0.2, random_state=random_state)
        X = X.astype(np.float32)
        _, X_test, _, _ = train_test_split(X, y, test_size=0.25, random_state=random_state, stratify=y)
        return abs(float(X_test[0, 0]) - float(leaked)) < 1e-6

    candidates = [HiddenSecret(secrets.token_bytes(32)) for _ in range(args.guesses)]
    costs = {
        "seed": _per_guess(lambda i: recipe(i), args.guesses, args.rounds),
        "secret": _per_guess(lambda i: recipe(candidates[i].random_state(stream)), args.guesses, args.rounds),
        "generator only": _per_guess(lambda i: candidates[i].random_state(stream), args.guesses, args.rounds),
    }
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"per guess, median of {args.rounds} rounds of {args.guesses} (load average {load:.1f}, "
        f"{os.cpu_count()} cores):"
    )
    for name, cost in costs.items():
        print(f"  {name:15s} {cost * 1e6:9.1f} µs")
    half_seeds = 2**31
    half_secrets = 2**127
    print(
        f"expected search, old recipe (2^31 seeds): {half_seeds * costs['seed'] / 3600:.1f} h on one core, "
        f"{half_seeds * costs['seed'] / 1000:.1f} s on 1,000 cores"
    )
    for name in ("secret", "generator only"):
        one = half_secrets * costs[name] / YEAR
        print(
            f"expected search, {name} (2^127 secrets): {one:.2e} years on one core, "
            f"{one / 1e6:.2e} years on a million cores"
        )


if __name__ == "__main__":
    main()
