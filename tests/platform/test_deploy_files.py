"""Dockerfile and compose.yaml cannot be run here (no Docker engine), so their claims are checked
by reading them: every variable they set is one the settings read, the image runs as a non-root
user with a health check and a data volume, and compose runs migrate before serve and worker."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from app.settings_docs import describe_environment

ROOT = Path(__file__).resolve().parents[2]
KNOWN = {v.name for v in describe_environment()}
PYTHON_RUNTIME = {
    "PATH",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PIP_NO_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK",
}


def dockerfile_env() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for pair in shlex.split(line[4:]):
                name, _, value = pair.partition("=")
                env[name] = value
    return env


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


def test_dockerfile_sets_only_known_variables() -> None:
    env = dockerfile_env()
    assert set(env) - PYTHON_RUNTIME <= KNOWN
    assert env["HOST"] == "0.0.0.0"  # reachable from outside the container


def test_dockerfile_is_multi_stage_non_root_with_health_check_and_volume() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert len(re.findall(r"(?m)^FROM ", text)) >= 2
    user = re.findall(r"(?m)^USER (\S+)", text)
    assert user
    assert user[-1] not in {"root", "0"}
    assert re.search(r"(?m)^HEALTHCHECK .*", text)
    assert "/health" in text
    assert re.search(r'(?m)^ENTRYPOINT \["python", "-m", "app"\]', text)
    assert re.search(r'(?m)^CMD \["serve"\]', text)
    volume = re.search(r'(?m)^VOLUME \["([^"]+)"\]', text)
    assert volume
    env = dockerfile_env()
    # The embedded default's database and key file live in the volume.
    assert env["DATABASE_URL"].endswith(f"{volume.group(1)}/sweepline.db")
    assert env["KEY_FILE"].startswith(volume.group(1) + "/")


def test_compose_runs_server_mode_with_migrate_serve_and_worker() -> None:
    services = compose()["services"]
    assert {"postgres", "redis", "migrate", "app", "worker"} <= set(services)
    commands = {name: services[name]["command"] for name in ("migrate", "app", "worker")}
    assert commands == {"migrate": ["migrate"], "app": ["serve"], "worker": ["worker"]}
    for name in ("app", "worker"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert depends["redis"]["condition"] == "service_healthy"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    # The worker serves no HTTP: the image's /health check must not mark it unhealthy.
    assert services["worker"]["healthcheck"] == {"disable": True}


def test_compose_environment_is_server_mode_with_required_keys() -> None:
    for name in ("migrate", "app", "worker"):
        env = compose()["services"][name]["environment"]
        assert set(env) <= KNOWN, set(env) - KNOWN
        assert env["DATABASE_URL"].startswith("postgresql+asyncpg://")
        assert env["REDIS_URL"].startswith("redis://")
        # Required in server mode: compose refuses to start without them (${VAR:?message}).
        assert env["ENCRYPTION_KEY"].startswith("${ENCRYPTION_KEY:?")
        assert env["SESSION_SECRET"].startswith("${SESSION_SECRET:?")


def test_dockerignore_keeps_local_state_out_of_the_image() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "var", "*.db", "*.key", "tests"):
        assert entry in ignored


def _interpolated(value: str, env: dict[str, str]) -> str:
    """Compose's ``${NAME:-default}`` (nested defaults too), innermost first."""
    innermost = re.compile(r"\$\{([A-Z_]+):-([^${}]*)\}")
    while m := innermost.search(value):
        value = value[: m.start()] + (env.get(m.group(1)) or m.group(2)) + value[m.end() :]
    return value


def test_pl20_compose_public_url_follows_the_published_port() -> None:
    raw = compose()["x-sweepline-env"]["PUBLIC_URL"]
    published = compose()["services"]["app"]["ports"][0]
    assert _interpolated(raw, {}) == "http://localhost:8000"
    assert _interpolated(published, {"PORT": "9123"}).startswith("9123:")
    assert _interpolated(raw, {"PORT": "9123"}) == "http://localhost:9123"
    assert _interpolated(raw, {"PORT": "9123", "PUBLIC_URL": "https://sw.example"}) == (
        "https://sw.example"
    )
