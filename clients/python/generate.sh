#!/bin/sh
# Python gRPC stubs for agentplane's API, under a Python package you choose:
#
#   clients/python/generate.sh <output dir> [package] [proto dir]
#
# writes <output dir>/<package>/platform/v1/*_pb2.py (and .pyi) and
# platform_service_pb2_grpc.py; put <output dir> on the import path and
# `from <package>.platform.v1 import platform_service_pb2_grpc`. The package
# defaults to agentplane_api (a dotted name nests: myservice.gen), the proto
# dir to this repository's proto/. Needs protoc with the well-known types and
# grpc_python_plugin (Debian: protobuf-compiler, libprotobuf-dev,
# protobuf-compiler-grpc).
#
# Why a package of your own: the API's proto package is platform.v1, so
# protoc writes platform/v1/*.py whose imports read `from platform.v1 import
# ...`, and Python's standard library already has a module named `platform`:
# generated as they are, the stubs fail to import ("No module named
# 'platform.v1'; 'platform' is not a package"). Here they go under the
# package and their imports are rewritten to match. What goes over the wire
# (/platform.v1.PlatformService/ListAgents) does not change.
set -eu
out=${1:?usage: generate.sh <output dir> [python package] [proto dir]}
package=${2:-agentplane_api}
proto=${3:-$(dirname "$0")/../../proto}
case $package in
  '' | [0-9.]* | *. | *..* | *[!A-Za-z0-9_.]*) echo "generate.sh: not a Python package name: $package" >&2; exit 2 ;;
esac
dir=$out/$(echo "$package" | tr . /)
mkdir -p "$dir"
protoc -I "$proto" --python_out="$dir" --pyi_out="$dir" "$proto"/platform/v1/*.proto
protoc -I "$proto" --grpc_python_out="$dir" --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
  "$proto"/platform/v1/platform_service.proto
# `from platform.v1 import x_pb2` becomes `from <package>.platform.v1 import x_pb2`.
for file in "$dir"/platform/v1/*.py "$dir"/platform/v1/*.pyi; do
  sed "s/^from platform\.v1 import /from $package.platform.v1 import /" "$file" > "$file.tmp"
  mv "$file.tmp" "$file"
done
# Every level a regular package.
level=$out
for part in $(echo "$package" | tr . ' ') platform v1; do
  level=$level/$part
  [ -e "$level/__init__.py" ] || : > "$level/__init__.py"
done
