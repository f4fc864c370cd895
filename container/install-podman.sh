#!/usr/bin/env bash
# Install what `make container` needs on a Debian/Ubuntu machine: podman (with its recommended
# netavark/CNI plugins, needed to publish ports), runc (crun fails on hosts with hybrid cgroups)
# and mmdebstrap (builds the base image from Debian packages when no registry is reachable),
# and Docker Compose when neither `docker compose` nor `docker-compose` answers (the SageMaker
# SDK's local mode starts containers with it: tests/contract/test_sdk_local_mode.py, through
# podman's Docker API). Does nothing when all are present. Non-interactive; uses sudo when not root.
set -euo pipefail

missing=()
for tool in podman runc mmdebstrap; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
    missing+=(docker-compose)
fi
if [ "${#missing[@]}" -eq 0 ]; then
    echo "podman, runc, mmdebstrap and Docker Compose are installed"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing: ${missing[*]}; install them with your package manager" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q "${missing[@]}"
