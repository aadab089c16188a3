"""The interop matrix: framework agents traced against chainlat.sim (see README.md)."""
