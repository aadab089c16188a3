"""pytest plugin for latency budgets (inert unless used)."""

from __future__ import annotations
