#!/usr/bin/env bash
#
# install-deps.sh: install, as root, the Debian 12 packages pgsandbox needs
# to build and test.  Does nothing for packages already there.
#
set -euo pipefail

# The extensions whose sources the fidelity tests clone (PostGIS, pg_partman,
# orafce) come from Debian too; xfsprogs makes the copy-on-write filesystem of
# the thin-clone test (test/pg/cow.sh); the metrics test scrapes Debian's
# prometheus-postgres-exporter with curl; Prometheus's promtool checks the
# alert rules (metrics/alerts.yml).
pkgs=(postgresql-15 postgresql-client-15 postgresql-contrib postgresql-server-dev-15
	  libpq-dev libkrb5-dev libipc-run-perl make gcc
	  postgresql-15-postgis-3 postgresql-15-partman postgresql-15-orafce locales
	  xfsprogs prometheus-postgres-exporter curl prometheus)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js 20 and npm drive the MCP end-to-end test; take Debian's only if
# the machine has none.
if ! command -v node >/dev/null 2>&1; then
	missing+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
	missing+=(npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	# the packages' services (prometheus, the exporter) are not started:
	# the tests run their own
	policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' > "$policy"
		chmod 755 "$policy"
		trap 'rm -f "$policy"' EXIT
	fi
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
