# Baseline for bench/image.py: the same locked stack installed the naive way, in one stage, sources copied first,
# no cache mounts and nothing removed. Not shipped; it shows what docker/Dockerfile's layout buys.
ARG BASE_IMAGE=debian:trixie-slim@sha256:d7e12182ce18b85b93007c1dedf31f2d29e01ccf3182cc4017c709b6259bc132
FROM ${BASE_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# UV_VERSION: the same uv release docker/Dockerfile uses.
ARG UV_VERSION=0.13.9
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=secret,id=ca,target=/etc/ssl/certs/ca-certificates.crt \
    python3 -m venv /opt/venv \
    && PIP_CERT=/etc/ssl/certs/ca-certificates.crt /opt/venv/bin/pip install --no-cache-dir "uv==${UV_VERSION}" \
    && SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt UV_PROJECT_ENVIRONMENT=/opt/venv UV_NO_CACHE=1 \
        /opt/venv/bin/uv sync --frozen --extra gpu --no-default-groups --no-editable
ENV PATH=/opt/venv/bin:$PATH
CMD ["trlstack", "--help"]
