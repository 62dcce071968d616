"""docker-compose.yml without a Docker engine: valid against the Compose Specification's JSON schema
(tests/fixtures/compose-spec.json), and every image, port, command and CLAIMWATCH_* variable it names
is one that exists: claimwatch's settings read the variables, its CLI has the commands, the services
listen on the mapped ports, and Prometheus, Alertmanager and Grafana point at services and ports that
are there.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from urllib.parse import urlparse

import jsonschema
import pytest
import yaml

from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.transitions import severity_for
from services.alerts.notify.payloads import alertmanager_payload
from services.app.settings import Settings, load_settings
from tests.support.paths import ROOT

COMPOSE = ROOT / "docker-compose.yml"
SCHEMA = ROOT / "tests/fixtures/compose-spec.json"
DOCKERFILE = "services/Dockerfile"
PROMETHEUS = ROOT / "dashboards/prometheus/prometheus.yml"
ALERTMANAGER = ROOT / "dashboards/alertmanager/alertmanager.yml"
DATASOURCES = ROOT / "dashboards/grafana/provisioning/datasources/clickhouse.yaml"
PROVIDERS = ROOT / "dashboards/grafana/provisioning/dashboards/claimwatch.yaml"
DASHBOARD = ROOT / "dashboards/grafana/claimwatch.json"

# What .env would hold; the file must require each of them rather than default to an empty secret.
SECRETS = {
    "CLICKHOUSE_PASSWORD": "test-password",
    "CLAIMWATCH_TOKEN_SHA256": "ab" * 32,
    "GRAFANA_ADMIN_PASSWORD": "test-admin",
}
# Ports each third-party image listens on (the images' documented defaults).
IMAGE_PORTS = {
    "clickhouse/clickhouse-server": {8123, 9000},
    "prom/alertmanager": {9093},
    "prom/prometheus": {9090},
    "grafana/grafana": {3000},
}
# Where each stateful service keeps what must survive a restart.
DATA_DIRS = {
    "kafka": "/var/lib/kafka/data",
    "clickhouse": "/var/lib/clickhouse",
    "alertmanager": "/alertmanager",
    "prometheus": "/prometheus",
    "grafana": "/var/lib/grafana",
}

_VARIABLE = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<name>\w+)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|(?P<bare>\w+))")


def interpolate(value, env: dict[str, str]):
    """Compose's variable interpolation ($$, ${V}, ${V:-d}, ${V-d}, ${V:?e}, ${V?e}, ${V:+a}) over a parsed file."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        if m["escaped"]:
            return "$"
        name = m["name"] or m["bare"]
        op, arg, current = m["op"], m["arg"], env.get(name)
        missing = current is None or (current == "" and op and op.startswith(":"))
        if op and op.endswith("?") and missing:
            raise KeyError(f"{name}: {arg}")
        if op and op.endswith("-") and missing:
            return arg
        if op and op.endswith("+"):
            return "" if missing else arg
        return current or ""

    return _VARIABLE.sub(one, value)


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def compose(raw) -> dict:
    return interpolate(raw, SECRETS)


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def claimwatch_services(compose) -> dict[str, dict]:
    return {
        name: s
        for name, s in compose["services"].items()
        if isinstance(s.get("build"), dict) and s["build"].get("dockerfile") == DOCKERFILE
    }


def settings_of(service: dict) -> Settings:
    return load_settings(None, environment(service), {})


def serves_api(service: dict) -> bool:
    command = service["command"]
    return command[0] == "api" or (command[0] in ("worker", "up") and "--serve-api" in command)


def listening_ports(name: str, service: dict) -> set[int]:
    if name in claimwatch_services({"services": {name: service}}):
        return {settings_of(service).api.port} if serves_api(service) else set()
    repository = service["image"].rsplit(":", 1)[0]
    if repository == "apache/kafka":
        listeners = environment(service)["KAFKA_LISTENERS"].split(",")
        return {int(listener.rsplit(":", 1)[1]) for listener in listeners}
    assert repository in IMAGE_PORTS, f"{name}: image {repository} is not known to this test; add its ports"
    return IMAGE_PORTS[repository]


def container_port(entry) -> int:
    if isinstance(entry, dict):
        return int(entry["target"])
    return int(str(entry).split("/")[0].rsplit(":", 1)[-1])


def service_endpoint(compose, url_or_target: str) -> tuple[str, int]:
    """host:port of a URL or a Prometheus target, checked to be a compose service listening there."""
    parsed = urlparse(url_or_target if "//" in url_or_target else f"tcp://{url_or_target}")
    host, port = parsed.hostname, parsed.port
    assert host in compose["services"], f"{url_or_target}: {host} is not a compose service"
    assert port in listening_ports(host, compose["services"][host]), (
        f"{url_or_target}: {host} does not listen on {port}"
    )
    return host, port


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (ROOT / DOCKERFILE).read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [tuple(line.split(None, 1)) for line in lines]


# -- the file as a whole ------------------------------------------------------------------------------


def test_the_file_is_valid_against_the_compose_specification(compose):
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose)]
    assert not errors, "\n".join(errors)
    broken = copy.deepcopy(compose)
    broken["services"]["api"]["healthcheck"]["retries"] = {"not": "a number"}
    broken["services"]["api"]["restart"] = ["always"]
    caught = {"/".join(map(str, e.absolute_path)) for e in validator.iter_errors(broken)}
    assert {"services/api/healthcheck/retries", "services/api/restart"} <= caught, "the schema must catch these"


def test_secrets_are_required_from_the_environment_not_written_in_the_file(raw):
    for name in SECRETS:
        with pytest.raises(KeyError, match=name):
            interpolate(raw, {k: v for k, v in SECRETS.items() if k != name})
    for service_name, service in raw["services"].items():
        for key, value in environment(service).items():
            if re.search(r"PASSWORD|TOKEN|SECRET", key):
                assert "${" in value, f"{service_name}.{key} holds a literal secret; take it from .env"


def test_images_are_pinned_to_a_version(compose):
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for name, service in compose["services"].items():
        assert "image" in service, f"{name}: no image"
        repository, _, tag = service["image"].rpartition(":")
        assert repository and "/" not in tag, f"{name}: {service['image']} has no tag"
        assert tag != "latest" and re.fullmatch(r"v?\d+(\.\d+)+", tag), f"{name}: {service['image']} is not a version"
    for name in claimwatch_services(compose):
        assert compose["services"][name]["image"] == f"claimwatch:{version}", (
            f"{name}: tag the build with pyproject's version"
        )


def test_every_service_has_a_healthcheck_and_restarts(compose):
    for name, service in compose["services"].items():
        check = service.get("healthcheck", {})
        assert check.get("test") and not check.get("disable") and check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert service.get("restart") in ("always", "unless-stopped", "on-failure"), name
        for code in [c for c in check["test"] if c.startswith("import ")]:
            compile(code, f"{name} healthcheck", "exec")
        for url in re.findall(r"https?://[\w.:-]+", " ".join(check["test"])):
            host = urlparse(url).hostname
            if host in ("127.0.0.1", "localhost"):
                assert urlparse(url).port in listening_ports(name, service), f"{name}: healthcheck {url}"
            else:
                service_endpoint(compose, url)


def test_stateful_services_keep_their_data_in_named_volumes(compose):
    for name, path in DATA_DIRS.items():
        mounts = {m.split(":")[1]: m.split(":")[0] for m in compose["services"][name]["volumes"]}
        assert path in mounts, f"{name}: {path} is not on a volume"
        assert mounts[path] in compose["volumes"], f"{name}: {mounts[path]} is not a named volume"
    assert environment(compose["services"]["kafka"])["KAFKA_LOG_DIRS"] == DATA_DIRS["kafka"]
    assert f"--storage.tsdb.path={DATA_DIRS['prometheus']}" in compose["services"]["prometheus"]["command"]
    assert f"--storage.path={DATA_DIRS['alertmanager']}" in compose["services"]["alertmanager"]["command"]
    for name, service in compose["services"].items():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: bind mount {source} does not exist in the repository"


def test_dependencies_wait_for_healthy_services(compose):
    for name, service in compose["services"].items():
        for dependency, _condition in service.get("depends_on", {}).items():
            assert dependency in compose["services"], f"{name} depends on unknown {dependency}"
    for name, service in claimwatch_services(compose).items():
        assert service["depends_on"]["clickhouse"]["condition"] == "service_healthy", name
        if service["command"][0] == "worker":
            assert service["depends_on"]["kafka"]["condition"] == "service_healthy", name


# -- claimwatch ----------------------------------------------------------------------------------------


def test_the_stack_runs_workers_scaled_out_the_api_and_the_clustering_schedule(compose):
    services = claimwatch_services(compose)
    commands = {name: s["command"] for name, s in services.items()}
    assert commands == {"worker": ["worker", "--serve-api"], "api": ["api"], "cluster": ["cluster", "--schedule"]}
    assert services["worker"]["deploy"]["replicas"] >= 2
    for service in services.values():
        assert service["build"]["context"] == "."


def test_every_claimwatch_variable_is_a_setting_claimwatch_reads(compose):
    for name, service in claimwatch_services(compose).items():
        env = environment(service)
        assert env and all(k.startswith("CLAIMWATCH_") for k in env), f"{name}: {sorted(env)}"
        settings = settings_of(service)  # SettingsError names an unknown or malformed field
        ((host, port),) = [service_endpoint(compose, t) for t in settings.kafka.split(",")]
        advertised = environment(compose["services"][host])["KAFKA_ADVERTISED_LISTENERS"]
        assert f"//{host}:{port}" in advertised, f"{name}: Kafka does not advertise {host}:{port}"
        ch = urlparse(settings.clickhouse)
        assert service_endpoint(compose, settings.clickhouse) == ("clickhouse", 8123)
        server = environment(compose["services"]["clickhouse"])
        assert (ch.username, ch.password, ch.path.lstrip("/")) == (
            server["CLICKHOUSE_USER"],
            server["CLICKHOUSE_PASSWORD"],
            server["CLICKHOUSE_DB"],
        )
        assert service_endpoint(compose, settings.notify.alertmanager_url) == ("alertmanager", 9093)
        assert service_endpoint(compose, settings.api.url) == ("api", settings.api.port)
        assert settings.api.token_hashes == (SECRETS["CLAIMWATCH_TOKEN_SHA256"],)
        if serves_api(service):
            assert settings.api.host == "0.0.0.0", f"{name}: the API must listen beyond the container's loopback"


@pytest.mark.slow
def test_every_claimwatch_command_exists_in_the_cli(compose):
    instructions = dict(dockerfile_instructions())
    assert json.loads(instructions["ENTRYPOINT"]) == ["claimwatch"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["claimwatch"] == "services.app.cli:main"
    for name, service in claimwatch_services(compose).items():
        # Flags go before --help, so click rejects an unknown one instead of printing help.
        done = subprocess.run(
            [sys.executable, "-m", "services.app.cli", *service["command"], "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{name}: `claimwatch {' '.join(service['command'])}` fails:\n{done.stderr}"


def test_the_image_holds_every_package_claimwatch_installs():
    copied = {args.split()[0] for op, args in dockerfile_instructions() if op == "COPY"}
    for source in copied:
        assert source.endswith("*") or (ROOT / source).exists(), f"{DOCKERFILE}: COPY {source} is not in the repository"
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {p.rstrip("*") for p in packages} <= copied


def test_mapped_ports_are_ports_the_services_listen_on(compose):
    mapped = {}
    for name, service in compose["services"].items():
        for entry in service.get("ports", []):
            port = container_port(entry)
            assert port in listening_ports(name, service), f"{name} maps {port}, which it does not listen on"
            mapped[name] = port
    assert mapped == {
        "kafka": 9094,
        "clickhouse": 8123,
        "api": settings_of(compose["services"]["api"]).api.port,
        "alertmanager": 9093,
        "prometheus": 9090,
        "grafana": 3000,
    }
    assert 9092 in listening_ports("kafka", compose["services"]["kafka"])


# -- Prometheus, Alertmanager, Grafana ---------------------------------------------------------------


def test_prometheus_scrapes_every_claimwatch_process_that_serves_metrics(compose, tmp_path):
    from fastapi.testclient import TestClient

    from services.api.app import create_api
    from services.app.compose import build
    from services.store.backends import ChdbStore
    from services.store.migrate import migrate

    assert (
        "./dashboards/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro"
        in compose["services"]["prometheus"]["volumes"]
    )
    config = yaml.safe_load(PROMETHEUS.read_text())
    scraped: dict[str, dict] = {}
    for job in config["scrape_configs"]:
        targets = [t for sc in job.get("static_configs", []) for t in sc["targets"]]
        targets += [f"{n}:{sd['port']}" for sd in job.get("dns_sd_configs", []) for n in sd["names"]]
        for target in targets:
            if target.startswith("localhost:"):
                assert job["job_name"] == "prometheus" and target == "localhost:9090"
                continue
            host, _ = service_endpoint(compose, target)
            scraped[host] = job
    serving = {n for n, s in claimwatch_services(compose).items() if serves_api(s)}
    assert serving == {"worker", "api"} and serving <= set(scraped)
    settings = settings_of(compose["services"]["api"])
    if settings.api.protect_reads:
        assert all("authorization" in scraped[n] for n in serving), "reads need a token: give Prometheus one"
    store = ChdbStore(tmp_path / "clickhouse")
    try:
        migrate(store)
        client = TestClient(create_api(build(settings, store)))
        for path in {scraped[n].get("metrics_path", "/metrics") for n in serving}:
            answer = client.get(path)
            assert answer.status_code == 200 and "claimwatch_events_total" in answer.text, (
                f"{path}: {answer.status_code}"
            )
        assert client.get("/readyz").status_code == 200  # what the healthchecks ask
    finally:
        store.close()


def test_prometheus_finds_its_rules_where_the_stack_mounts_them_and_alerts_through_the_stacks_alertmanager(compose):
    prometheus = compose["services"]["prometheus"]
    config_mount = "./dashboards/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro"
    assert (
        config_mount in prometheus["volumes"]
        and "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    )
    config = yaml.safe_load(PROMETHEUS.read_text())
    assert config["rule_files"], "the rules about claimwatch itself (dashboards/prometheus/rules.yml)"
    for rule_file in config["rule_files"]:  # relative to the configuration file, in the repository and the container
        assert (PROMETHEUS.parent / rule_file).is_file(), rule_file
        assert f"./dashboards/prometheus/{rule_file}:/etc/prometheus/{rule_file}:ro" in prometheus["volumes"], rule_file
    (alertmanagers,) = config["alerting"]["alertmanagers"]
    (targets,) = [sc["targets"] for sc in alertmanagers["static_configs"]]
    assert [service_endpoint(compose, t) for t in targets] == [("alertmanager", 9093)]


def test_alertmanager_groups_and_inhibits_on_labels_claimwatch_sends(compose):
    assert (
        "./dashboards/alertmanager/alertmanager.yml:/etc/alertmanager/alertmanager.yml:ro"
        in compose["services"]["alertmanager"]["volumes"]
    )
    config = yaml.safe_load(ALERTMANAGER.read_text())
    receivers = {r["name"] for r in config["receivers"]}
    routes = [config["route"], *config["route"].get("routes", [])]
    assert all(r.get("receiver", config["route"]["receiver"]) in receivers for r in routes)
    now = datetime(2026, 11, 21, tzinfo=UTC)
    alert = Alert(
        alert_id="a-1",
        route="billing-faq",
        kind="hallucination_rate_rise",
        severity="critical",
        labels={"service": "claimwatch"},
        window=30,
        pending_since=now,
        starts_at=now,
    )
    sent = alertmanager_payload(alert, "http://localhost:8080", now, now - now)["labels"]
    assert set(config["route"]["group_by"]) <= set(sent)
    severities = {severity_for(0.0, 0.02), severity_for(1.0, 0.02)}
    for rule in config["inhibit_rules"]:
        assert set(rule["equal"]) <= set(sent)
        for matcher in rule["source_matchers"] + rule["target_matchers"]:
            label, value = re.fullmatch(r'(\w+)="([^"]*)"', matcher).groups()
            assert label in sent and (label != "severity" or value in severities), matcher


def test_grafana_gets_the_plugin_the_provisioning_and_the_dashboard(compose):
    grafana = compose["services"]["grafana"]
    env = environment(grafana)
    dashboard = json.loads(DASHBOARD.read_text())
    plugin_versions = {  # the ClickHouse panels' (the SLO panels read Prometheus, built into Grafana)
        t["pluginVersion"] for p in dashboard["panels"] for t in p["targets"] if p["datasource"]["type"] != "prometheus"
    }
    assert env["GF_INSTALL_PLUGINS"] == f"grafana-clickhouse-datasource {plugin_versions.pop()}" and not plugin_versions
    mounts = {m.split(":")[1]: m.split(":")[0] for m in grafana["volumes"]}
    assert mounts["/etc/grafana/provisioning"] == "./dashboards/grafana/provisioning"
    (provider,) = yaml.safe_load(PROVIDERS.read_text())["providers"]
    dashboard_path = f"{provider['options']['path']}/claimwatch.json"
    assert mounts[dashboard_path] == "./dashboards/grafana/claimwatch.json"
    assert env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == dashboard_path
    (datasource,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    assert service_endpoint(compose, f"{datasource['jsonData']['host']}:{datasource['jsonData']['port']}") == (
        "clickhouse",
        8123,
    )
    assert datasource["jsonData"]["defaultDatabase"] == environment(compose["services"]["clickhouse"])["CLICKHOUSE_DB"]
    for variable in re.findall(r"\$(\w+)", DATASOURCES.read_text()):
        assert variable in env, f"the datasource provisioning reads ${variable}, which Grafana's environment lacks"
    (prometheus,) = yaml.safe_load((DATASOURCES.parent / "prometheus.yaml").read_text())["datasources"]
    host_port = prometheus["url"].removeprefix("http://")
    assert service_endpoint(compose, host_port) == ("prometheus", 9090)  # the SLO panels' Prometheus


@pytest.mark.parametrize(
    "kind, rise, receiver",
    [
        ("mix_shift", 0.05, "traffic-review"),  # mostly a change in the mix of questions: never pages
        ("hallucination_rate_rise", 0.05, "on-call"),  # a regression, critical
        ("hallucination_rate_rise", 0.025, "on-call"),  # a regression, warning
    ],
)
def test_alertmanager_pages_on_regressions_and_not_on_mix_shifts(kind, rise, receiver):
    """The shipped routing, asked of the real Alertmanager's amtool with the labels claimwatch sends."""
    now = datetime(2026, 11, 21, tzinfo=UTC)
    alert = Alert(
        alert_id="a-1",
        route="billing-faq",
        kind=kind,
        severity=severity_for(rise, 0.02, kind),
        labels={"service": "claimwatch"},
        window=30,
        pending_since=now,
        starts_at=now,
        delta=rise,
    )
    labels = alertmanager_payload(alert, "http://localhost:8080", now, now - now)["labels"]
    assert (labels["severity"] == "warning") == (kind == "mix_shift" or rise < 0.04)
    answer = subprocess.run(
        [
            "amtool",
            "config",
            "routes",
            "test",
            f"--config.file={ALERTMANAGER}",
            *(f"{k}={v}" for k, v in labels.items()),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.split() == [receiver]
