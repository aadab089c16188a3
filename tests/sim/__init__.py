"""Tests of chainlat.sim, the local model server."""
