#!/usr/bin/env bash
# Fuzzes every target in fuzz/ for MINUTES each (default 10), with cargo-fuzz on the nightly
# toolchain (installed here if missing). New inputs that crash or hang land in
# fuzz/artifacts/<target>/: copy them to fuzz/regressions/<target>/ with the fix, and
# tests/fuzz_replay.rs keeps them fixed on stable.
#   scripts/fuzz.sh [MINUTES] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
shift || true
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz.sh: needs a nightly toolchain (rustup toolchain install nightly)" >&2
  exit 1
fi
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^name = "\([a-z_]*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^llm-doctor')
fi
cd fuzz
for t in "${targets[@]}"; do
  echo "fuzz.sh: $t for ${minutes} min"
  # A copy of the corpus: what the fuzzer adds stays out of the repository unless chosen.
  work=$(mktemp -d)
  cp -r "corpus/$t/." "$work/"
  [ -d "regressions/$t" ] && cp -r "regressions/$t/." "$work/"
  cargo +nightly fuzz run "$t" "$work" -- -max_total_time=$((minutes * 60)) -timeout=10 -rss_limit_mb=4096
  rm -rf "$work"
done
