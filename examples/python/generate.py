"""Generates exprd's Python stubs from the repository's proto/ directory.

    /usr/bin/python3 generate.py [OUT]

OUT defaults to gen/ next to this file (git ignores it). The stubs are
never committed: they are generated again before each run, so they always
match the protos. It uses the protoc bundled in grpc_tools (Debian's
python3-grpc-tools), and the well-known types (google/protobuf/*.proto)
shipped with it, which is all proto/exprd/v1 imports besides itself.
"""

import shutil
import sys
from pathlib import Path

from grpc_tools import protoc

HERE = Path(__file__).resolve().parent
PROTO_DIR = HERE.parent.parent / "proto"
WELL_KNOWN = Path(protoc.__file__).resolve().parent / "_proto"


def main() -> int:
    if len(sys.argv) > 2:
        print("usage: generate.py [OUT]", file=sys.stderr)
        return 2
    out = (Path(sys.argv[1]) if len(sys.argv) == 2 else HERE / "gen").resolve()
    protos = sorted(PROTO_DIR.glob("exprd/v1/*.proto"))
    if not protos:
        print(f"generate.py: no protos in {PROTO_DIR / 'exprd/v1'}", file=sys.stderr)
        return 1
    # Stubs of a proto that no longer exists must not linger.
    shutil.rmtree(out / "exprd", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"-I{WELL_KNOWN}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        *map(str, protos),
    ]
    if protoc.main(args) != 0:
        print("generate.py: protoc failed", file=sys.stderr)
        return 1
    print(f"generated {len(protos)} protos into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
