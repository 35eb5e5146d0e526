#!/usr/bin/env bash
# Installs the Debian packages the Python example needs, for /usr/bin/python3:
# grpcio, grpc_tools (protoc for Python) and protobuf. It does nothing when
# they import already, and runs apt-get update only when the install fails
# without it (a fresh image has no package lists). Needs root or sudo.
set -euo pipefail

packages=(python3-grpcio python3-grpc-tools python3-protobuf)
python=/usr/bin/python3

have_deps() {
  "$python" -c 'import grpc, grpc_tools.protoc, google.protobuf' >/dev/null 2>&1
}

if have_deps; then
  exit 0
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps.sh: not root and no sudo: install ${packages[*]} as root" >&2
    exit 1
  fi
  sudo=(sudo)
fi

install() {
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"
}

if ! install; then
  "${sudo[@]}" apt-get update
  install
fi

if ! have_deps; then
  echo "install-deps.sh: ${packages[*]} installed, but $python still cannot import grpc, grpc_tools and google.protobuf" >&2
  exit 1
fi
