#!/usr/bin/env bash
# Runs the end-to-end demo: the operator reconciling a simulated GPU cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "demo: the operator, kubesim and nodesim are not built yet; only the client library exists." >&2
echo "demo: run scripts/test.sh to exercise what is here." >&2
exit 2
