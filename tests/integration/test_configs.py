"""The pipeline configs in collector/: accepted by the real binary, and consistent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .stack import COLLECTOR_DIR, validate

CONFIGS = ("otelcol.yaml", "otelcol-lb.yaml", "jaeger.yaml")
STORAGE_EXAMPLES = tuple(
    f"storage/jaeger-{store}.yaml"
    for store in ("elasticsearch", "opensearch", "cassandra", "clickhouse")
)
"""Jaeger on shared storage: validated only, since no such server runs in the tests."""
ENV_REFERENCE = re.compile(r"\$\{env:([A-Z0-9_]+)(?::-([^}]*))?\}")

# (config, text to replace, replacement, why it must fail)
BREAKAGES = [
    ("otelcol.yaml", "sampling_percentage:", "sampling_percent:", "misspelt policy key"),
    ("otelcol.yaml", 'decision_wait: "', 'decision_wait: "soon', "not a duration"),
    ("otelcol.yaml", "exporters: [otlp/jaeger]", "exporters: [otlp/nowhere]", "undefined exporter"),
    ("otelcol.yaml", "limit_percentage: 80", "limit_percentage: 180", "limit over 100 %"),
    ("jaeger.yaml", "max_traces:", "max_tracez:", "unknown storage key"),
    ("jaeger.yaml", "processors: [batch]", "processors: [batching]", "undefined processor"),
    ("jaeger.yaml", "ttl:", "ttls:", "unknown badger key"),
    ("otelcol.yaml", "- attributes[", "- attributez[", "twin filter not OTTL"),
    ("otelcol-lb.yaml", "hostnames:", "hostname:", "unknown resolver key"),
    ("otelcol-lb.yaml", "[loadbalancing/traces]", "[loadbalancing/spans]", "undefined exporter"),
    ("storage/jaeger-opensearch.yaml", "server_urls:", "server_urlz:", "unknown storage key"),
    ("storage/jaeger-cassandra.yaml", "keyspace:", "key_space:", "unknown storage key"),
    ("storage/jaeger-clickhouse.yaml", "addresses:", "address:", "unknown storage key"),
    ("storage/jaeger-elasticsearch.yaml", "index_prefix:", "prefix:", "unknown storage key"),
]


def _env_references(config: str) -> dict[str, str | None]:
    """{variable: default} for every ${env:...} in the config's values (not its comments)."""
    found: dict[str, str | None] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str):
            found.update((m.group(1), m.group(2)) for m in ENV_REFERENCE.finditer(node))

    walk(yaml.safe_load((COLLECTOR_DIR / config).read_text()))
    return found


@pytest.mark.integration
@pytest.mark.usefixtures("jaeger_binary")
@pytest.mark.parametrize("config", CONFIGS + STORAGE_EXAMPLES)
def test_shipped_config_passes_validation(config: str) -> None:
    """`run.sh validate` accepts each config as shipped, with its defaults."""
    done = validate(COLLECTOR_DIR / config)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok "), done.stdout


@pytest.mark.integration
@pytest.mark.usefixtures("jaeger_binary")
@pytest.mark.parametrize(("config", "old", "new", "why"), BREAKAGES, ids=[b[3] for b in BREAKAGES])
def test_broken_config_fails_validation(
    tmp_path: Path, config: str, old: str, new: str, why: str
) -> None:
    """A copy with one bad edit is rejected: validation is a real check, not a parse."""
    text = (COLLECTOR_DIR / config).read_text()
    assert old in text, f"{config} no longer contains {old!r}; update the breakage"
    broken = tmp_path / Path(config).name
    broken.write_text(text.replace(old, new, 1))
    done = validate(broken)
    assert done.returncode != 0, f"{why}: accepted\n{done.stdout}"
    assert done.stdout.startswith("INVALID "), done.stdout


def test_compose_file_mounts_the_shipped_configs() -> None:
    """docker-compose.yml parses, pins its images and mounts configs that exist: the
    scaled topology, a load balancer in front of two sampling replicas."""
    compose = yaml.safe_load((COLLECTOR_DIR / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"lb", "replica-1", "replica-2", "jaeger", "prometheus"}
    mounted: dict[str, str] = {}
    for name, service in services.items():
        image = service["image"]
        assert ":" in image, f"{name}: image {image} has no tag"
        assert not image.endswith(":latest"), f"{name}: image {image} is not pinned"
        for volume in service["volumes"]:
            source, target, *_ = volume.split(":")
            if source.startswith("."):
                assert (COLLECTOR_DIR / source).exists(), f"{name}: {source} does not exist"
                mounted[target] = source
        (config_arg,) = [a for a in service["command"] if a.startswith("--config")]
        assert config_arg.split("=", 1)[1] in mounted, f"{name}: config not mounted"
    configs = {Path(s).name for s in mounted.values() if s.endswith((".yaml", ".yml"))}
    assert configs == {*CONFIGS, "prometheus.yml"}
    backends = services["lb"]["environment"]["CHAINLAT_LB_BACKENDS"]
    assert backends == "[replica-1:4317, replica-2:4317]"


def test_compose_sets_only_variables_the_configs_read() -> None:
    """Every CHAINLAT_* variable in docker-compose.yml is read by the mounted config."""
    compose = yaml.safe_load((COLLECTOR_DIR / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        config = Path(service["volumes"][0].split(":")[0]).name
        if config not in CONFIGS:
            continue
        unknown = set(service.get("environment", {})) - set(_env_references(config))
        assert not unknown, f"{name}: {sorted(unknown)} not read by {config}"


@pytest.mark.parametrize("config", CONFIGS)
def test_every_variable_has_a_default_and_is_documented(config: str) -> None:
    """Each ${env:...} in a config has a default and a row in collector/README.md."""
    readme = (COLLECTOR_DIR / "README.md").read_text()
    references = _env_references(config)
    assert references
    for variable, default in references.items():
        assert default, f"{config}: ${{env:{variable}}} has no :- default"
        assert f"`{variable}`" in readme, f"{variable} is not documented in collector/README.md"
