"""The core: no OpenTelemetry. Attribute keys, errors, the rollup, the run model, statistics."""
