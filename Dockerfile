# Sweepline: one image for every role (serve, worker, migrate).
#
#   docker build -t sweepline .
#   docker run -p 8000:8000 -v sweepline-data:/var/lib/sweepline sweepline
#
# Without DATABASE_URL the container runs the embedded default: SQLite and its generated key file
# live in the /var/lib/sweepline volume. See compose.yaml for server mode (PostgreSQL + Redis).

# -- build: the wheel users install, into a virtualenv ----------------------------------------------
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
# Dependencies first, so editing the code does not invalidate this layer.
COPY pyproject.toml README.md ./
COPY app/__init__.py app/__init__.py
RUN pip install . && pip uninstall -y sweepline

COPY app ./app
# The same wheel CI installs and serves (.ci/wheel-install): no simulators, no demo, no dev extras.
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && pip install --no-deps /wheels/sweepline-*.whl

# -- runtime: the virtualenv and the code, run by an unprivileged user -----------------------------
FROM python:3.11-slim AS runtime

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOST=0.0.0.0 \
    PORT=8000 \
    LOG_FORMAT=json \
    DATABASE_URL=sqlite+aiosqlite:////var/lib/sweepline/sweepline.db \
    KEY_FILE=/var/lib/sweepline/sweepline.key

RUN groupadd --system --gid 10001 sweepline \
 && useradd --system --uid 10001 --gid sweepline --home-dir /srv/sweepline --shell /usr/sbin/nologin sweepline \
 && mkdir -p /var/lib/sweepline /srv/sweepline \
 && chown sweepline:sweepline /var/lib/sweepline

COPY --from=build /opt/venv /opt/venv

WORKDIR /srv/sweepline
USER sweepline

# The SQLite database and the generated encryption key of the embedded default.
VOLUME ["/var/lib/sweepline"]
EXPOSE 8000

# Liveness only (/ready also checks the database and the queue). The slim image has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('PORT', '8000')}/health\", timeout=4)"]

# SIGTERM: stop leasing, finish or release in-flight jobs within SHUTDOWN_GRACE_SECONDS.
STOPSIGNAL SIGTERM
ENTRYPOINT ["python", "-m", "app"]
CMD ["serve"]
