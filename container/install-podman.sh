#!/usr/bin/env bash
# Install what `make container` needs on a Debian/Ubuntu machine: podman (with its recommended
# netavark/CNI plugins, needed to publish ports), runc (crun fails on hosts with hybrid cgroups)
# and mmdebstrap (builds the base image from Debian packages when no registry is reachable).
# Does nothing when all three are present. Non-interactive; uses sudo when not root.
set -euo pipefail

missing=()
for tool in podman runc mmdebstrap; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "podman, runc and mmdebstrap are installed"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing: ${missing[*]}; install podman, runc and mmdebstrap with your package manager" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing podman runc mmdebstrap (missing: ${missing[*]})"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q podman runc mmdebstrap
