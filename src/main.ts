/**
 * The entry point (`npm start`). First the process re-executes itself with Node's compile
 * cache (src/host/compile-cache.ts): that has to happen before the service's modules load,
 * so they are imported only then, from src/boot.ts.
 */
import { reexecWithCompileCache } from './host/compile-cache.ts';

reexecWithCompileCache();
await import('./boot.ts');
