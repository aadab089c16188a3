"""The reference: the interop agent instrumented by chainlat alone.

chainlat's workflow, data stage and tool spans, model calls traced from the wire by
``chainlat.instrument_httpx()``, the plain openai SDK against the sim. Every stack's
cases are compared with this run. It ignores ``--wrapped`` and ``--httpx``: it is
always both.
"""

from __future__ import annotations

import dataclasses
import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent  # type: ignore[import-not-found]  # one folder up, on sys.path at run time


def main() -> None:
    """Run the reference agent: a warm-up, then the recorded runs."""
    case = dataclasses.replace(_agent.parse_case(["--httpx", *sys.argv[1:]]), wrapped=True)
    exporter = _agent.install(case, _agent.tracer_provider("reference"))

    import openai

    client = openai.OpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)

    def agent() -> None:
        with _agent.app_span():
            _agent.plain_openai_agent(client.chat.completions.create)

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
