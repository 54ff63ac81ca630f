import net from 'node:net';
import postgres from 'postgres';
class P extends net.Socket { write(...a) { process.stderr.write('MINE\n'); return super.write(...a); } }
const sql = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, socket: ({ host, port }) => { const s = new P(); console.log('factory', typeof s.write, s.write === P.prototype.write); return s.connect(port[0], host[0]); } });
console.log(await sql`select 1 as x`);
await sql.end();
