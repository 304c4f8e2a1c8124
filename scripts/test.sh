#!/usr/bin/env bash
# Runs every test on a fresh machine: installs what the tests need, then the Rust test suite
# (unit, golden, property, CLI and fixture tests) and the playbook fixture tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# Real servers for the integration tests (tests/prom): prometheus, promtool, victoria-metrics.
scripts/install-test-servers.sh

# The fixture generator (checked by a test) needs PyYAML.
if ! python3 -c 'import yaml' 2>/dev/null; then
  python3 -m pip install --quiet pyyaml
fi

# The Kubernetes and Prometheus Operator schemas deploy/kubernetes is validated against
# (tests/deploy.rs), from the npm registry, pinned by deploy/check/package-lock.json.
if [ ! -d deploy/check/node_modules ]; then
  if ! command -v npm >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  npm ci --prefix deploy/check --no-audit --no-fund --silent
fi

# The Grafana Foundation SDK's dashboard types deploy/grafana is checked against
# (tests/grafana.rs), from PyPI, pinned.
if [ ! -d deploy/check/python/grafana_foundation_sdk ]; then
  python3 -m pip install --quiet --disable-pip-version-check --target deploy/check/python \
    'grafana-foundation-sdk==1769699998!10.1.0'
fi

cargo test --workspace --all-targets
cargo run --quiet -- rules check
cargo run --quiet -- rules test fixtures
