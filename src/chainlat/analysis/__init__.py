"""Offline analysis of runs: latency profiles, what-if estimates, variant comparison, diffs."""
