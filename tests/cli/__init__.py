"""Tests of the chainlat command line."""
