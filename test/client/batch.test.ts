/**
 * The batch helpers of the client (issue 16 §3): `ref()` builds `{{op.field}}` templates
 * (interface §4.5 rule 3) and refuses what would not be one; `normalizeOperation` gives the
 * service the operation shape of §2.8. The service side is in browser-data.test.ts.
 */
import t from 'tap';
import { normalizeOperation, ref } from '../../src/client/index.ts';

t.test('ref builds the four template forms', async (t) => {
  t.equal(ref('order', 'id'), '{{order.id}}');
  t.equal(ref('items', 0, 'id'), '{{items.0.id}}');
  t.equal(ref('items', '*', 'id'), '{{items.*.id}}');
  t.equal(ref('order', 'nested.field'), '{{order.nested.field}}');
  t.equal(ref('op0', 'a', 'b', 'c'), '{{op0.a.b.c}}');
  t.equal(ref('my-op_1', 'x'), '{{my-op_1.x}}');
});

t.test('ref refuses what the service could not read as a template', async (t) => {
  t.throws(() => ref('order'), { name: 'TypeError', message: 'a template needs a field path' });
  t.throws(() => ref('', 'id'), TypeError);
  t.throws(() => ref('a.b', 'id'), TypeError, 'a dot in the op id');
  t.throws(() => ref('a}}', 'id'), TypeError);
  t.throws(() => ref('a', 'x}}y'), TypeError);
  t.throws(() => ref('a', 'x..y'), TypeError, 'an empty segment');
  t.throws(() => ref('a', ''), TypeError);
  t.throws(() => ref('a', 'has space'), TypeError);
});

t.test('normalizeOperation: paths, query objects, bodies', async (t) => {
  t.same(normalizeOperation({ method: 'GET', path: 'todos' }), { method: 'GET', path: '/rest/v1/todos' });
  t.same(normalizeOperation({ id: 'f', method: 'POST', path: 'rpc/fn', body: { a: 1 } }), { method: 'POST', id: 'f', path: '/rest/v1/rpc/fn', body: { a: 1 } });
  t.same(normalizeOperation({ method: 'PATCH', path: '/rest/v1/todos', query: '?id=eq.1', body: { done: true } }), {
    method: 'PATCH',
    path: '/rest/v1/todos',
    query: 'id=eq.1',
    body: { done: true },
  });
  t.equal(
    normalizeOperation({ method: 'GET', path: 'todos', query: { id: `in.(${ref('all', '*', 'id')})`, select: 'id,title', order: 'id.desc' } }).query,
    'id=in.({{all.*.id}})&select=id,title&order=id.desc',
    'templates stay readable in a query object',
  );
  t.equal(normalizeOperation({ method: 'GET', path: 'todos', query: { title: 'eq.a&b c', n: 5, ok: true } }).query, 'title=eq.a%26b%20c&n=5&ok=true', '& and spaces encoded');
  t.equal(normalizeOperation({ method: 'delete' as 'DELETE', path: 'todos', query: 'id=eq.1' }).method, 'DELETE', 'method upper-cased');
});
