"""Loads the protobuf and gRPC modules compiled from goodput's API (package goodput.v1).

They are compiled at build time, never committed: `cmake --build build --target
goodput_sdk_python` writes a ready package to build/sdk/python whose `_gen` folder holds them.
When the package is used straight from the source tree, GOODPUT_SDK_GEN_PATH names a folder
that contains `goodput/v1/mfu_pb2.py` (the `--python_out` folder of protoc).
"""

import os
import sys

GEN_PATH_ENV = "GOODPUT_SDK_GEN_PATH"


def _find_gen_path():
    candidates = []
    env_path = os.environ.get(GEN_PATH_ENV)
    if env_path:
        candidates.append(env_path)
    candidates.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_gen"))
    for path in candidates:
        if os.path.isfile(os.path.join(path, "goodput", "v1", "mfu_pb2.py")):
            return path
    raise ImportError(
        "goodput_sdk: the compiled goodput.v1 protobuf modules were not found in "
        + " or ".join(repr(c) for c in candidates)
        + "; build them with `cmake --build <build> --target goodput_sdk_python` and put "
        "<build>/sdk/python on PYTHONPATH, or set " + GEN_PATH_ENV)


_gen_path = _find_gen_path()
# The generated modules import each other as `goodput.v1.<name>_pb2`, so their root must be
# importable as a top-level folder.
if _gen_path not in sys.path:
    sys.path.append(_gen_path)

from goodput.v1 import common_pb2  # noqa: E402
from goodput.v1 import mfu_pb2  # noqa: E402
from goodput.v1 import mfu_pb2_grpc  # noqa: E402

__all__ = ["common_pb2", "mfu_pb2", "mfu_pb2_grpc"]
