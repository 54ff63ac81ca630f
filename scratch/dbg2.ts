import { PipelineSocket } from '/work/wt/reqpath/src/core/pipeline.ts';
import postgres from 'postgres';
const sql = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, socket: ({ host, port }: any) => { const s = new PipelineSocket(); (globalThis as any).S = s; return s.connect(port[0], host[0]); } } as any);
console.log(await sql`select 1 as x`);
const s: any = (globalThis as any).S;
console.log(Object.getOwnPropertyNames(s).slice(0, 5));
await sql.end();
