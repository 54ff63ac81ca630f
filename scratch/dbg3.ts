import { PipelineSocket } from '/work/wt/reqpath/src/core/pipeline.ts';
import postgres from 'postgres';
let made = 0;
const sql = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, socket: ({ host, port }: any) => { made++; const s = new PipelineSocket(); const w = s.write; s.write = function (...a: any[]) { console.log('W', a[0]?.length); return w.apply(this, a as any); } as any; return s.connect(port[0], host[0]); } } as any);
console.log(await sql`select 1 as x`, made);
await sql.end();
