"""What a framework's own traces lack, added by chainlat: one module per framework, each
importing its framework lazily (an optional dependency, never one of chainlat's).

- :mod:`chainlat.integrations.pipecat`: a Pipecat observer recording function calls as
  tool steps and the first audio at the output transport as the turn's first output.
"""
