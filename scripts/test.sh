#!/usr/bin/env bash
# Runs every test on a fresh machine: installs what the tests need, then the Rust test suite
# (unit, golden, property, CLI and fixture tests) and the playbook fixture tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# promtool (Debian's prometheus package) checks that recordings import into Prometheus.
if ! command -v promtool >/dev/null 2>&1; then
  [ -f /usr/sbin/policy-rc.d ] || printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d   # keep package scripts from starting daemons
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

# The fixture generator (checked by a test) needs PyYAML.
if ! python3 -c 'import yaml' 2>/dev/null; then
  python3 -m pip install --quiet pyyaml
fi

cargo test --workspace --all-targets
cargo run --quiet -- rules check
cargo run --quiet -- rules test fixtures
