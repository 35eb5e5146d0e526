#!/usr/bin/env bash
# Installs the Debian packages the Python example needs, for /usr/bin/python3:
# grpcio and protobuf, and protoc 3.21 with the gRPC Python plugin and the
# well-known protos (generate.py). It does nothing when
# they import already, and runs apt-get update only when the install fails
# without it (a fresh image has no package lists). Needs root or sudo.
set -euo pipefail

packages=(python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc libprotobuf-dev)
python=/usr/bin/python3

have_deps() {
  "$python" -c 'import grpc, google.protobuf' >/dev/null 2>&1 &&
    [ -x /usr/bin/protoc ] && [ -x /usr/bin/grpc_python_plugin ] && [ -f /usr/include/google/protobuf/any.proto ]
}

# --check only says whether they are all there (the test asks first).
if [ "${1:-}" = --check ]; then
  have_deps
  exit
fi

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
  echo "install-deps.sh: ${packages[*]} installed, but $python still cannot import grpc and google.protobuf, or protoc, grpc_python_plugin or the well-known protos are missing" >&2
  exit 1
fi
