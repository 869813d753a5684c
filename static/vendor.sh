#!/usr/bin/env bash
# Fetches the front-end files AuditWeb serves itself (no CDN) from the npm registry,
# checks them against the recorded SHA-256, and writes them to static/vendor/.
#   bash static/vendor.sh           # verify the committed files; fetch any that are missing
#   bash static/vendor.sh --update  # fetch the pinned versions again and record new hashes
set -euo pipefail
cd "$(dirname "$0")/vendor"
# package@version  file-inside-the-package  name-here
ASSETS=(
  "htmx.org@2.0.11 dist/htmx.min.js htmx.min.js"
  "chart.js@4.6.1 dist/chart.umd.min.js chart.umd.min.js"
  # the API's browsable docs at /api/docs/ (drf-spectacular's Swagger UI page)
  "swagger-ui-dist@5.35.0 swagger-ui-bundle.js swagger-ui-bundle.js"
  "swagger-ui-dist@5.35.0 swagger-ui-standalone-preset.js swagger-ui-standalone-preset.js"
  "swagger-ui-dist@5.35.0 swagger-ui.css swagger-ui.css"
)
update=${1:-}
for entry in "${ASSETS[@]}"; do
  read -r pkg inner name <<<"$entry"
  if [[ -f "$name" && "$update" != "--update" ]]; then
    continue
  fi
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null 2>&1 && tar -xzf ./*.tgz)
  cp "$tmp/package/$inner" "$name"
  cp "$tmp/package/LICENSE"* "${name%%.*}.LICENSE" 2>/dev/null || true
  rm -rf "$tmp"
  echo "fetched $pkg -> static/vendor/$name"
done
if [[ "$update" == "--update" ]]; then
  sha256sum ./*.js ./*.css >SHA256SUMS
fi
sha256sum --check --quiet SHA256SUMS
