"""Tests against the real Jaeger v2 / Collector binaries (collector/)."""
