import { Db } from '/work/wt/reqpath/src/core/db.ts';
import { createLogger } from '/work/wt/reqpath/src/core/log.ts';
import { cloneTemplate } from '/work/wt/reqpath/test/helpers/database.ts';
import net from 'node:net';
const ow = net.Socket.prototype.write; (net.Socket.prototype as any).write = function (c: any, ...a: any[]) { if (Buffer.isBuffer(c) && this.constructor.name === "PipelineSocket") { const t=[]; for (let i=0;i<c.length;){ if (c.length-i<5) break; t.push(String.fromCharCode(c[i])); i+=1+c.readUInt32BE(i+1);} console.log("OUT", t.join(" ")); } return ow.call(this, c, ...a); };
const clone = await cloneTemplate('dbg_');
const db = new Db({ url: clone.url, poolSize: 1, log: createLogger('silent') });
const user = { role: 'authenticated', claims: '{"role":"authenticated","sub":"x"}', claimsObject: {} };
try {
  for (let i = 0; i < 3; i++) {
    const r = await db.withContext(user, (c) => c`select current_user as role, current_setting('request.jwt.claims', true) as c, current_setting('statement_timeout') as t`);
    console.log([...r]);
  }
} finally { await db.end(); await clone.drop(); }
