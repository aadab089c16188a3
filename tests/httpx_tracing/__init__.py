"""Tests of chainlat.httpx, the automatic tracing of model calls."""
