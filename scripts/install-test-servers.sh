#!/usr/bin/env bash
# Installs the real servers the integration tests start (tests/prom/mod.rs): Debian's
# `prometheus` package (prometheus, promtool), `victoria-metrics` and `prometheus-alertmanager`
# (prometheus-alertmanager, amtool), `chromium` (the postmortem HTML report is rendered in it
# headless) and `nginx-light` (a gateway writing its JSON access log, tests/gateway.rs). Idempotent: installs only
# what is missing, and runs `apt-get update` only then. Needs root and the Debian package
# registry. Facts behind each step: Debian starts a package's daemon on install unless
# policy-rc.d forbids it (done below).
set -euo pipefail

# binary -> Debian package that provides it
declare -A package_of=(
  [prometheus]=prometheus
  [promtool]=prometheus
  [victoria-metrics]=victoria-metrics
  [prometheus-alertmanager]=prometheus-alertmanager
  [amtool]=prometheus-alertmanager
  [chromium]=chromium
  [nginx]=nginx-light
)

missing=()
for bin in prometheus promtool victoria-metrics prometheus-alertmanager amtool chromium nginx; do
  if command -v "$bin" >/dev/null 2>&1; then
    echo "install-test-servers: $bin already installed ($(command -v "$bin"))"
  else
    pkg=${package_of[$bin]}
    case " ${missing[*]-} " in *" $pkg "*) ;; *) missing+=("$pkg") ;; esac
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-test-servers: nothing to install"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-test-servers: need root to install ${missing[*]}" >&2
  exit 1
fi

# Without this guard the package scripts would start daemons on the default ports (9090,
# 8428); 101 means "action forbidden" to invoke-rc.d. An existing policy is left as it is.
if [ ! -f /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  echo "install-test-servers: created /usr/sbin/policy-rc.d so no daemon starts"
fi
chmod +x /usr/sbin/policy-rc.d

echo "install-test-servers: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

for bin in prometheus promtool victoria-metrics chromium; do
  command -v "$bin" >/dev/null 2>&1 || { echo "install-test-servers: $bin still missing" >&2; exit 1; }
done
echo "install-test-servers: installed: $(dpkg-query -W -f '${Package} ${Version}  ' "${missing[@]}")"
