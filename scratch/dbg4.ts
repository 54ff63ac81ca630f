import net from 'node:net';
import postgres from 'postgres';
const ow = net.Socket.prototype.write;
(net.Socket.prototype as any).write = function (...a: any[]) { if (this.constructor.name === 'PipelineSocket') process.stderr.write(new Error().stack + '\n'); return ow.apply(this, a as any); };
const { PipelineSocket } = await import('/work/wt/reqpath/src/core/pipeline.ts');
const sql = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, socket: ({ host, port }: any) => new PipelineSocket().connect(port[0], host[0]) } as any);
await sql`select 1 as x`;
await sql.end();
