/**
 * Node strips the types of a `.ts` file itself, but refuses to under node_modules
 * (ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING): installed as a dependency, plinth's own
 * TypeScript goes through this load hook instead, which strips it with Node's own
 * `stripTypeScriptTypes` (erasable syntax only, as everywhere in plinth). In the repository
 * it does nothing. Loaded first by the `plinth` command and by `plinth/testing`, and with
 * `--import` by the child processes plinth starts itself.
 */
import { readFileSync } from 'node:fs';
import module from 'node:module';
import { fileURLToPath } from 'node:url';

const ROOT = new URL('../', import.meta.url).href;

if (ROOT.includes('/node_modules/') && !globalThis.__plinthStripTypes) {
  globalThis.__plinthStripTypes = true;
  // The one experimental warning stripTypeScriptTypes gives is not the user's concern.
  const emit = process.emitWarning;
  process.emitWarning = function (warning, ...rest) {
    const text = typeof warning === 'string' ? warning : warning?.message;
    if (typeof text === 'string' && text.includes('stripTypeScriptTypes')) return;
    return emit.call(process, warning, ...rest);
  };
  module.registerHooks({
    load(url, context, nextLoad) {
      if (url.startsWith(ROOT) && url.endsWith('.ts') && !url.slice(ROOT.length).includes('/node_modules/')) {
        const source = module.stripTypeScriptTypes(readFileSync(fileURLToPath(url), 'utf8'), { mode: 'strip' });
        return { format: 'module', source, shortCircuit: true };
      }
      return nextLoad(url, context);
    },
  });
}
