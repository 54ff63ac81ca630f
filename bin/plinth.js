#!/usr/bin/env node
// The `plinth` command (src/cli/main.ts). Run through npx or an npm script, `node` is the
// Node 24 of the `node` package plinth depends on.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 23 || (major === 23 && minor < 6)) {
  process.stderr.write(`plinth needs Node 24 (this is ${process.version}): run it as \`npx plinth …\` or from an npm script, which use the Node of the \`node\` package\n`);
  process.exit(1);
}
await import('./strip-types.js');
await import('../src/cli/main.ts');
