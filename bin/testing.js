// `plinth/testing` (src/testing/index.ts), loaded through the type-stripping hook.
await import('./strip-types.js');
const testing = await import('../src/testing/index.ts');
export const startPlinth = testing.startPlinth;
export const serverUrl = testing.serverUrl;
