#!/usr/bin/env bash
# The one list of Debian 12 packages sluice needs to build, test and benchmark.
# Installs the missing ones with apt-get (through sudo when not root).
# Usage: scripts/deps.sh                install what is missing
#        scripts/deps.sh --list         print the list
#        scripts/deps.sh --build [--list]  only what building the programs and
#                                          libraries needs (the Dockerfile's build stage)
set -euo pipefail

build_packages=(
  build-essential   # gcc, make
  cmake             # the build
  pkg-config        # finds the libraries below
  libuv1-dev        # sluiced's event loops
  libyaml-dev       # the config file
  libcjson-dev      # HTTP: the JSON body of POST /v1/check
  libhiredis-dev    # sluiced's central store (--store redis://, redis-cluster://); a test client
  libnghttp2-dev    # the gRPC face (--grpc-port): HTTP/2 sessions
  libprotobuf-c-dev # the gRPC face: the runtime of the generated message code
  protobuf-c-compiler # protoc-c: C from proto/*.proto at build time; the tests' descriptor sets
)
packages=(
  "${build_packages[@]}"
  libcriterion-dev  # unit tests
  clang             # fuzz targets (libFuzzer)
  libclang-rt-14-dev # libFuzzer, ASan and UBSan runtimes for clang
  python3-pytest    # integration tests (tests/integration, run with /usr/bin/python3)
  python3-redis     # integration tests: redis-py as a real client; bench/fleet_compare.sh
  redis-tools       # integration tests: redis-cli; bench: redis-benchmark
  redis-server      # module tests and bench: a real Redis 7 to load sluice-redis.so into
  nginx             # HTTP tests: a real nginx with auth_request in front of sluiced; bench: limit_req
  curl              # HTTP tests: a real HTTP client
  python3-requests  # HTTP tests: Python's HTTP client
  python3-grpcio    # gRPC tests: a real gRPC client (Python's grpcio)
  python3-protobuf  # gRPC tests: message classes built from protoc-c's descriptor set
  python3-h2        # gRPC tests: raw HTTP/2 frames no gRPC library sends (open deadlines, resets)
  wrk               # bench: the HTTP load generator
  procps            # bench: pgrep, to sum a server's CPU time with its workers'
  chromium          # the live page's test: a real browser, headless (tests/integration/test_ui.py)
  python3-websocket # the live page's test: the DevTools protocol's WebSocket to chromium
)
# The Node.js client's tests (clients/node): node, and npm to install ioredis for them.
# Only when the command is missing: a Node.js from elsewhere (NodeSource's nodejs
# bundles npm) conflicts with Debian's npm package.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

if [[ ${1:-} == --build ]]; then
  packages=("${build_packages[@]}")
  shift
fi
if [[ ${1:-} == --list ]]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

echo "scripts/deps.sh: installing ${missing[*]}" >&2
sudo=()
((EUID == 0)) || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
