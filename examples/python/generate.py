"""Generates exprd's Python stubs from the repository's proto/ directory.

    /usr/bin/python3 generate.py [OUT]

OUT defaults to gen/ next to this file (git ignores it). The stubs are
never committed: they are generated again before each run, so they always
match the protos. It runs Debian's protoc (protobuf-compiler, 3.21: the
protos use proto3's optional fields, which the protoc bundled in
python3-grpc-tools predates) with Debian's grpc_python_plugin
(protobuf-compiler-grpc), the versions of python3-protobuf and
python3-grpcio. proto/exprd/v1 imports the well-known types
(google/protobuf/*.proto, from libprotobuf-dev) and google/rpc/status.proto
(vendored under proto/): the latter is compiled here too, into
OUT/google/rpc, because neither grpcio nor protobuf ships its module.
"""

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO_DIR = HERE.parent.parent / "proto"
PROTOC = "/usr/bin/protoc"
GRPC_PLUGIN = "/usr/bin/grpc_python_plugin"
WELL_KNOWN = Path("/usr/include")  # google/protobuf/*.proto


def main() -> int:
    if len(sys.argv) > 2:
        print("usage: generate.py [OUT]", file=sys.stderr)
        return 2
    out = (Path(sys.argv[1]) if len(sys.argv) == 2 else HERE / "gen").resolve()
    protos = sorted(PROTO_DIR.glob("exprd/v1/*.proto"))
    vendored = sorted(PROTO_DIR.glob("google/rpc/*.proto"))
    if not protos or not vendored:
        print(f"generate.py: no protos in {PROTO_DIR / 'exprd/v1'} or {PROTO_DIR / 'google/rpc'}", file=sys.stderr)
        return 1
    # Stubs of a proto that no longer exists must not linger.
    shutil.rmtree(out / "exprd", ignore_errors=True)
    shutil.rmtree(out / "google", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    args = [
        PROTOC,
        f"-I{PROTO_DIR}",
        f"-I{WELL_KNOWN}",
        f"--plugin=protoc-gen-grpc_python={GRPC_PLUGIN}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        *map(str, protos + vendored),
    ]
    if subprocess.run(args).returncode != 0:
        print("generate.py: protoc failed", file=sys.stderr)
        return 1
    print(f"generated {len(protos) + len(vendored)} protos into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
