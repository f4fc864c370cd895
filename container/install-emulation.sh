#!/usr/bin/env bash
# Install what building and running the linux/arm64 image on an x86_64 machine needs
# (`make container-arm64`): QEMU user emulation (qemu-user-static) registered with the kernel's
# binfmt_misc (binfmt-support), with the F flag so that it also works inside containers.
# Mounts binfmt_misc when it is not. Does nothing on an arm64 machine or when qemu-aarch64 is
# already registered. Non-interactive; uses sudo when not root.
set -euo pipefail

BINFMT=/proc/sys/fs/binfmt_misc
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

case "$(uname -m)" in
    aarch64 | arm64)
        echo "arm64 machine: no emulation needed"
        exit 0
        ;;
esac

if [ ! -e "$BINFMT/register" ]; then
    echo "mounting binfmt_misc at $BINFMT"
    $sudo mount -t binfmt_misc binfmt_misc "$BINFMT"
fi

if [ ! -e "$BINFMT/qemu-aarch64" ]; then
    if ! command -v qemu-aarch64-static >/dev/null 2>&1 || ! command -v update-binfmts >/dev/null 2>&1; then
        if ! command -v apt-get >/dev/null 2>&1; then
            echo "missing: qemu-user-static, binfmt-support; install them with your package manager" >&2
            exit 1
        fi
        echo "installing qemu-user-static binfmt-support"
        export DEBIAN_FRONTEND=noninteractive
        $sudo apt-get update -q
        $sudo apt-get install -y -q qemu-user-static binfmt-support
    fi
    $sudo update-binfmts --enable qemu-aarch64 || true
fi

if [ ! -e "$BINFMT/qemu-aarch64" ] || ! grep -q '^enabled' "$BINFMT/qemu-aarch64"; then
    echo "qemu-aarch64 is not registered in $BINFMT (update-binfmts --enable qemu-aarch64)" >&2
    exit 1
fi
# F (fix binary): the kernel opens the interpreter at registration, so it runs inside containers
if ! grep -q '^flags:.*F' "$BINFMT/qemu-aarch64"; then
    echo "qemu-aarch64 is registered without the F flag: arm64 containers cannot find it" >&2
    exit 1
fi
echo "qemu-aarch64 registered: $(grep '^flags' "$BINFMT/qemu-aarch64")"
