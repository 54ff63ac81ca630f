import net from 'node:net';
class P extends net.Socket { write(...a) { process.stderr.write('MINE\n'); return super.write(...a); } }
const srv = net.createServer((c) => c.end()).listen(0, () => {
  const s = new P(); s.connect(srv.address().port, '127.0.0.1');
  console.log('own write after connect', Object.getOwnPropertyNames(s).filter((n) => /write/i.test(n)));
  s.write(Buffer.from('x'));
  s.on('connect', () => { console.log('own write on connect', Object.getOwnPropertyNames(s).filter((n) => /write/i.test(n))); s.write(Buffer.from('y')); s.end(); srv.close(); });
});
