"""Stage 2: trusted measurements. Facts only, never verdicts; never imports submission code."""
