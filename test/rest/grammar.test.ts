import t from 'tap';
import type { Test } from 'tap';
import {
  GrammarError,
  INVALID_EMBED,
  INVALID_REQUEST,
  MAX_LOGIC_DEPTH,
  STAR_SELECT,
  parseFilter,
  parseLimitOffset,
  parseLogic,
  parseOrder,
  parseQuery,
  parseSelect,
} from '../../src/rest/grammar.ts';
import { NO_PREFER, parsePrefer } from '../../src/rest/prefer.ts';
import { shapeOf } from '../../src/rest/shape.ts';
import type { FilterNode, LogicNode, SelectNode, Value } from '../../src/rest/grammar.ts';

type Tap = Test;

/** Asserts fn throws a GrammarError with exactly this public message and status 400. */
function throwsWith(tt: Tap, fn: () => unknown, message: string, what: string): void {
  try {
    fn();
    tt.fail(`${what}: expected ${JSON.stringify(message)}, nothing thrown`);
  } catch (err) {
    if (!(err instanceof GrammarError)) {
      tt.fail(`${what}: expected GrammarError, got ${String(err)}`);
      return;
    }
    tt.equal(err.publicMessage, message, `${what}: publicMessage`);
    tt.equal(err.message, message, `${what}: message`);
    tt.equal(err.status, 400, `${what}: status`);
  }
}
const bad = (tt: Tap, fn: () => unknown, what: string): void => throwsWith(tt, fn, INVALID_REQUEST, what);
const badEmbed = (tt: Tap, fn: () => unknown, what: string): void => throwsWith(tt, fn, INVALID_EMBED, what);

/** Filter plus its bound value(s), for compact assertions. */
function filter(column: string, raw: string): { node: FilterNode; values: Value[] } {
  const values: Value[] = [];
  return { node: parseFilter(column, raw, values), values };
}

/** Renders a logic tree with values inlined, for compact assertions. */
function render(n: FilterNode | LogicNode, values: Value[]): string {
  if (n.kind === 'logic') return (n.negated ? 'not.' : '') + n.op + '(' + n.children.map((c) => render(c, values)).join(',') + ')';
  const head = n.column + '.' + (n.negated ? 'not.' : '') + n.op;
  if (n.op === 'is') return head + '.' + n.value;
  if (n.op === 'fts' || n.op === 'plfts' || n.op === 'phfts' || n.op === 'wfts') {
    return head + (n.langSlot === null ? '' : `(${String(values[n.langSlot])})`) + '.' + JSON.stringify(values[n.slot]);
  }
  return head + '.' + JSON.stringify(values[n.slot]);
}

/** Renders a select tree back to text. */
function sel(n: SelectNode): string {
  return n.items
    .map((i) => (i.kind === 'star' ? '*' : i.kind === 'column' ? i.name : `${i.relation}(${sel(i.select)})`))
    .join(',');
}

t.test('GrammarError', async (t) => {
  const e = new GrammarError('invalid request');
  t.ok(e instanceof Error);
  t.equal(e.status, 400);
  t.equal(e.publicMessage, 'invalid request');
  t.equal(e.message, 'invalid request');
  t.equal(e.name, 'GrammarError');
  t.equal(INVALID_REQUEST, 'invalid request');
  t.equal(INVALID_EMBED, 'invalid embed in request');
});

t.test('select', async (t) => {
  t.test('default and star', async (t) => {
    t.equal(parseSelect(undefined), STAR_SELECT);
    t.equal(parseSelect(''), STAR_SELECT);
    t.equal(parseSelect('   '), STAR_SELECT);
    t.same(parseSelect('*'), { items: [{ kind: 'star' }] });
    t.same(STAR_SELECT, { items: [{ kind: 'star' }] });
    t.ok(Object.isFrozen(STAR_SELECT));
  });

  t.test('columns', async (t) => {
    t.same(parseSelect('id,name'), {
      items: [
        { kind: 'column', name: 'id' },
        { kind: 'column', name: 'name' },
      ],
    });
    t.equal(sel(parseSelect(' id ,  name , created_at ')), 'id,name,created_at');
    t.equal(sel(parseSelect('a$b,_x,C1,2x,ünï')), 'a$b,_x,C1,2x,ünï');
    t.same(parseSelect('"my col","a\\"b",x'), {
      items: [
        { kind: 'column', name: 'my col' },
        { kind: 'column', name: 'a"b' },
        { kind: 'column', name: 'x' },
      ],
    });
    t.equal(sel(parseSelect('*,id')), '*,id');
    t.equal(sel(parseSelect('count')), 'count', 'a top-level column called count is the compiler’s business');
  });

  t.test('embeds', async (t) => {
    const s = parseSelect('id,books(id,title)');
    t.same(s, {
      items: [
        { kind: 'column', name: 'id' },
        {
          kind: 'embed',
          relation: 'books',
          select: {
            items: [
              { kind: 'column', name: 'id' },
              { kind: 'column', name: 'title' },
            ],
          },
        },
      ],
    });
    t.equal(sel(parseSelect('books(*)')), 'books(*)');
    t.equal(sel(parseSelect(' id , books ( id , title ) , x ')), 'id,books(id,title),x');
    t.equal(sel(parseSelect('a(b(c)),d(e)')), 'a(b(c)),d(e)');
    t.equal(sel(parseSelect('rel(count,id)')), 'rel(count,id)');
    t.equal(sel(parseSelect('"my rel"(id)')), 'my rel(id)');
  });

  t.test('depth: three levels below the top table are fine, a fourth is not', async (t) => {
    t.equal(
      sel(parseSelect('id,books(id,chapters(id,paragraphs(id)))')),
      'id,books(id,chapters(id,paragraphs(id)))',
    );
    t.equal(sel(parseSelect('a(b(c(*))),d(e(f(g)))')), 'a(b(c(*))),d(e(f(g)))');
    badEmbed(t, () => parseSelect('id,books(id,chapters(id,paragraphs(id,sentences(id))))'), '4 levels');
    badEmbed(t, () => parseSelect('a(b(c(d(*))))'), '4 levels with *');
    badEmbed(t, () => parseSelect('a(b(c(d(e(f)))))'), '5 levels');
    badEmbed(t, () => parseSelect('x,a(b(c(x))),a(b(c(d(e))))'), 'second branch too deep');
  });

  t.test('rel(count) and malformed parens', async (t) => {
    badEmbed(t, () => parseSelect('books(count)'), 'rel(count)');
    badEmbed(t, () => parseSelect('id,books( count )'), 'rel( count )');
    badEmbed(t, () => parseSelect('books(id,chapters(count))'), 'nested rel(count)');
    t.same(parseSelect('n:count()::text').items[0], { kind: 'column', name: '*', aggregate: 'count', alias: 'n', cast: 'text' }, 'count(): an aggregate');
    t.same(parseSelect('pages.sum()').items[0], { kind: 'column', name: 'pages', aggregate: 'sum' }, 'col.sum()');
    bad(t, () => parseSelect('pages.median()'), 'an aggregate plinth does not take');
    bad(t, () => parseSelect('pages.sum(x)'), 'an aggregate takes no argument');
    t.same(parseSelect('books!inner( )').items[0], { kind: 'embed', relation: 'books', select: { items: [] }, inner: true }, 'empty embed');
    t.same(parseSelect('books( )').items[0], { kind: 'embed', relation: 'books', select: { items: [] } }, 'blank embed: empty too');
    badEmbed(t, () => parseSelect('books(id'), 'unclosed');
    badEmbed(t, () => parseSelect('books(id,chapters(id)'), 'unclosed outer');
    badEmbed(t, () => parseSelect('books('), 'open only');
    badEmbed(t, () => parseSelect('id)'), 'stray )');
    badEmbed(t, () => parseSelect('books(id))'), 'extra )');
    badEmbed(t, () => parseSelect('(id)'), 'no relation name');
    badEmbed(t, () => parseSelect('*(id)'), 'star with parens');
    badEmbed(t, () => parseSelect('id,)'), ') as an item');
    badEmbed(t, () => parseSelect('books(id,)'), 'trailing comma in embed');
  });

  t.test('other syntax → invalid request', async (t) => {
    for (const s of [
      'id,,name',
      ',id',
      'id,',
      'id name',
      'id::nosuchtype',
      'id::',
      'a:',
      'a:...b(c)',
      'x:y:z',
      'id;drop',
      'a-b',
      'a.b',
      '"unterminated',
      '""',
      'id"x"',
      'data->',
      'data->>',
      'data->-',
      'data-a',
    ]) {
      bad(t, () => parseSelect(s), JSON.stringify(s));
    }
  });
});

t.test('filters', async (t) => {
  t.test('comparison operators, with and without not.', async (t) => {
    for (const op of ['eq', 'neq', 'gt', 'gte', 'lt', 'lte'] as const) {
      for (const negated of [false, true]) {
        const { node, values } = filter('age', (negated ? 'not.' : '') + op + '.42');
        t.same(node, { kind: 'filter', column: 'age', negated, op, slot: 0 }, `${op} negated=${negated}`);
        t.same(values, ['42']);
      }
    }
  });

  t.test('scalar values are taken verbatim', async (t) => {
    t.same(filter('x', 'eq.').values, [''], 'empty value');
    t.same(filter('x', 'eq.1.5').values, ['1.5'], 'dots in value');
    t.same(filter('x', 'eq.a,b(c)').values, ['a,b(c)'], 'commas and parens');
    t.same(filter('x', 'eq."q"').values, ['"q"'], 'quotes kept at top level');
    t.same(filter('x', 'eq. spaced ').values, [' spaced '], 'whitespace kept');
    t.same(filter('x', 'eq.not.x').values, ['not.x']);
    t.same(filter('x', 'neq.null').node, { kind: 'filter', column: 'x', negated: false, op: 'neq', slot: 0 });
  });

  t.test('like / ilike: * becomes %', async (t) => {
    for (const op of ['like', 'ilike'] as const) {
      for (const negated of [false, true]) {
        const { node, values } = filter('name', (negated ? 'not.' : '') + op + '.*ab*c*');
        t.same(node, { kind: 'filter', column: 'name', negated, op, slot: 0 });
        t.same(values, ['%ab%c%']);
      }
    }
    t.same(filter('name', 'like.plain').values, ['plain']);
    t.same(filter('name', 'like.50%').values, ['50%']);
  });

  t.test('is', async (t) => {
    for (const v of ['null', 'true', 'false', 'unknown'] as const) {
      for (const negated of [false, true]) {
        const { node, values } = filter('flag', (negated ? 'not.' : '') + 'is.' + v);
        t.same(node, { kind: 'filter', column: 'flag', negated, op: 'is', value: v });
        t.same(values, [], 'is binds nothing');
      }
    }
    t.same(filter('flag', 'is.NULL').node, { kind: 'filter', column: 'flag', negated: false, op: 'is', value: 'null' });
    t.same(filter('flag', 'is.True').node, { kind: 'filter', column: 'flag', negated: false, op: 'is', value: 'true' });
    for (const v of ['', 'nil', '0', 'nullx', 'not_null', 'null ', 'yes', 'unknownx']) {
      bad(t, () => parseFilter('flag', 'is.' + v), `is.${v}`);
    }
  });

  t.test('in', async (t) => {
    let r = filter('id', 'in.(1,2,3)');
    t.same(r.node, { kind: 'filter', column: 'id', negated: false, op: 'in', slot: 0 });
    t.same(r.values, [['1', '2', '3']]);
    r = filter('id', 'not.in.(1,2)');
    t.same(r.node, { kind: 'filter', column: 'id', negated: true, op: 'in', slot: 0 });
    t.same(r.values, [['1', '2']]);
    t.same(filter('id', 'in.()').values, [[]], 'empty list');
    t.same(filter('id', 'in.( )').values, [[]], 'blank list');
    t.same(filter('id', 'in.(x)').values, [['x']]);
    t.same(filter('id', 'in.( a , b )').values, [['a', 'b']], 'whitespace around elements');
    t.same(filter('id', 'in.(a b,c)').values, [['a b', 'c']], 'inner whitespace kept');
    t.same(filter('id', 'in.(a,,b)').values, [['a', '', 'b']], 'empty element');
    t.same(filter('id', 'in.(a,)').values, [['a', '']], 'trailing empty element');
    t.same(filter('id', 'in.("a,b","c)d","e(f")').values, [['a,b', 'c)d', 'e(f']], 'quoted commas and parens');
    t.same(filter('id', 'in.("say \\"hi\\"",x)').values, [['say "hi"', 'x']], 'escaped quotes');
    t.same(filter('id', 'in.("back\\\\slash")').values, [['back\\slash']], 'escaped backslash');
    t.same(filter('id', 'in.("")').values, [['']], 'quoted empty');
    t.same(filter('id', 'in.( "a" , "b" )').values, [['a', 'b']], 'whitespace around quoted');
    t.same(filter('id', 'in.(say "hi")').values, [['say "hi"']], 'quote inside an unquoted element (postgrest-js)');
    t.same(filter('id', 'in.(1,2) ').values, [['1', '2']], 'trailing whitespace');
    for (const raw of [
      'in.1,2',
      'in.(1,2',
      'in.(1,2))',
      'in.(1,2)x',
      'in.("a"b)',
      'in."a"',
      'in.("unterminated)',
      'in.("a\\',
      'in.',
      'in',
      'in.[1,2]',
      'in.{1,2}',
    ]) {
      bad(t, () => parseFilter('id', raw), raw);
    }
  });

  t.test('cs / cd / ov', async (t) => {
    for (const op of ['cs', 'cd', 'ov'] as const) {
      for (const negated of [false, true]) {
        const { node, values } = filter('tags', (negated ? 'not.' : '') + op + '.{a,b}');
        t.same(node, { kind: 'filter', column: 'tags', negated, op, slot: 0 });
        t.same(values, ['{a,b}']);
      }
      t.same(filter('r', op + '.[1,5]').values, ['[1,5]'], `${op} range`);
      t.same(filter('r', op + '.(1,5)').values, ['(1,5)'], `${op} open range`);
      t.same(filter('r', op + '.[1,5)').values, ['[1,5)'], `${op} half-open range`);
      t.same(filter('j', op + '.{"a":{"b":1}}').values, ['{"a":{"b":1}}'], `${op} json object`);
      t.same(filter('j', op + '.{}').values, ['{}'], `${op} empty array`);
      for (const v of ['a,b', '{a,b', 'a,b}', '', '{', '1', '"{a}"']) bad(t, () => parseFilter('tags', `${op}.${v}`), `${op}.${v}`);
    }
  });

  t.test('range operators', async (t) => {
    for (const op of ['sl', 'sr', 'nxl', 'nxr', 'adj'] as const) {
      for (const negated of [false, true]) {
        const { node, values } = filter('during', (negated ? 'not.' : '') + op + '.[1,5)');
        t.same(node, { kind: 'filter', column: 'during', negated, op, slot: 0 });
        t.same(values, ['[1,5)']);
      }
      t.same(filter('d', `${op}.("2020-01-01 00:00","2020-02-01")`).values, ['("2020-01-01 00:00","2020-02-01")']);
      for (const v of ['1,5', '{1,5}', '[1,5', '', '[', 'empty']) bad(t, () => parseFilter('during', `${op}.${v}`), `${op}.${v}`);
    }
  });

  t.test('full-text search', async (t) => {
    for (const op of ['fts', 'plfts', 'phfts', 'wfts'] as const) {
      for (const negated of [false, true]) {
        let r = filter('body', (negated ? 'not.' : '') + op + '.cat & dog');
        t.same(r.node, { kind: 'filter', column: 'body', negated, op, slot: 0, langSlot: null });
        t.same(r.values, ['cat & dog']);
        r = filter('body', (negated ? 'not.' : '') + op + '(english).fat cats');
        t.same(r.node, { kind: 'filter', column: 'body', negated, op, slot: 0, langSlot: 1 });
        t.same(r.values, ['fat cats', 'english']);
      }
    }
    t.same(filter('b', 'fts(pg_catalog_X1).x').values, ['x', 'pg_catalog_X1']);
    for (const raw of ['fts()', 'fts().x', 'fts(english.x', 'fts(eng lish).x', 'fts(english)x', 'fts(a;b).x', 'eq(english).x']) {
      bad(t, () => parseFilter('body', raw), raw);
    }
  });

  t.test('bad operators and syntax', async (t) => {
    for (const raw of [
      '',
      '1',
      'eq',
      'eq1',
      'EQ.1',
      'Eq.1',
      'equals.1',
      'foo.1',
      'not.1',
      'not.',
      'not',
      'not.not.eq.1',
      'not.foo.1',
      '.eq.1',
      ' eq.1',
      'eq(some).{1,2}',
      'eq(any.{1,2}',
      'eq(any).1',
      'in(any).{1,2}',
      'is(any).{null}',
      'is',
      'like',
      'match.x',
      'imatch.x',
      'isdistinct.x',
    ]) {
      bad(t, () => parseFilter('col', raw), JSON.stringify(raw));
    }
  });

  t.test('dotted keys are kept as the column name', async (t) => {
    const { node, values } = filter('relation.column', 'eq.1');
    t.same(node, { kind: 'filter', column: 'relation.column', negated: false, op: 'eq', slot: 0 });
    t.same(values, ['1']);
    const q = parseQuery('books.title=eq.x&a.b.c=not.is.null');
    t.same(
      q.filters.map((f) => f.column),
      ['books.title', 'a.b.c'],
    );
  });

  t.test('slots accumulate in a shared array', async (t) => {
    const values: Value[] = ['pre'];
    const a = parseFilter('a', 'eq.1', values);
    const b = parseFilter('b', 'is.null', values);
    const c = parseFilter('c', 'in.(x,y)', values);
    const d = parseFilter('d', 'fts(simple).z', values);
    t.same([a, b, c, d].map((f) => ('slot' in f ? f.slot : -1)), [1, -1, 2, 3]);
    t.same(values, ['pre', '1', ['x', 'y'], 'z', 'simple']);
  });
});

t.test('logic groups', async (t) => {
  function logic(kind: 'or' | 'and', raw: string, negated = false): string {
    const values: Value[] = [];
    return render(parseLogic(kind, raw, negated, values), values);
  }

  t.test('flat', async (t) => {
    const values: Value[] = [];
    const n = parseLogic('or', '(a.eq.1,b.gt.2)', false, values);
    t.same(n, {
      kind: 'logic',
      op: 'or',
      negated: false,
      children: [
        { kind: 'filter', column: 'a', negated: false, op: 'eq', slot: 0 },
        { kind: 'filter', column: 'b', negated: false, op: 'gt', slot: 1 },
      ],
    });
    t.same(values, ['1', '2']);
    t.equal(logic('and', '(a.eq.1)'), 'and(a.eq."1")');
    t.equal(logic('or', '(a.eq.1)', true), 'not.or(a.eq."1")');
    t.equal(logic('and', '(a.eq.1,b.eq.2)', true), 'not.and(a.eq."1",b.eq."2")');
  });

  t.test('nested', async (t) => {
    t.equal(
      logic('or', '(a.eq.1,and(b.gt.2,c.lt.3),not.or(d.is.null,e.eq.x))'),
      'or(a.eq."1",and(b.gt."2",c.lt."3"),not.or(d.is.null,e.eq."x"))',
    );
    t.equal(logic('and', '(or(and(or(a.eq.1))))'), 'and(or(and(or(a.eq."1"))))');
    t.equal(logic('and', '(not.and(a.eq.1,b.eq.2),c.eq.3)'), 'and(not.and(a.eq."1",b.eq."2"),c.eq."3")');
    t.equal(logic('or', '( a.eq.1 , and ( b.eq.2 ) )'), 'or(a.eq."1",and(b.eq."2"))', 'whitespace');
  });

  t.test('every operator inside a group, with and without not.', async (t) => {
    t.equal(
      logic(
        'or',
        '(a.eq.1,a.neq.1,a.gt.1,a.gte.1,a.lt.1,a.lte.1,n.like.*x*,n.ilike.x*,f.is.true,f.is.unknown,' +
          'i.in.(1,2),t.cs.{a,b},t.cd.{a},t.ov.{b,c},r.sl.[1,5),r.sr.(1,5],r.nxl.[1,2],r.nxr.[1,2],r.adj.[1,2],' +
          'b.fts.x,b.plfts(english).y z,b.phfts.p,b.wfts(simple).w)',
      ),
      'or(a.eq."1",a.neq."1",a.gt."1",a.gte."1",a.lt."1",a.lte."1",n.like."%x%",n.ilike."x%",f.is.true,f.is.unknown,' +
        'i.in.["1","2"],t.cs."{a,b}",t.cd."{a}",t.ov."{b,c}",r.sl."[1,5)",r.sr."(1,5]",r.nxl."[1,2]",r.nxr."[1,2]",r.adj."[1,2]",' +
        'b.fts."x",b.plfts(english)."y z",b.phfts."p",b.wfts(simple)."w")',
    );
    t.equal(
      logic('and', '(a.not.eq.1,f.not.is.null,i.not.in.(1),t.not.cs.{a,b},r.not.adj.[1,2],b.not.fts(english).x,n.not.like.a*)'),
      'and(a.not.eq."1",f.not.is.null,i.not.in.["1"],t.not.cs."{a,b}",r.not.adj."[1,2]",b.not.fts(english)."x",n.not.like."a%")',
    );
  });

  t.test('quoting and values', async (t) => {
    t.equal(logic('or', '(name.eq."a,b",x.eq.1)'), 'or(name.eq."a,b",x.eq."1")');
    t.equal(logic('or', '(name.eq."a)b(",x.eq.1)'), 'or(name.eq."a)b(",x.eq."1")');
    t.equal(logic('or', '(name.eq."say \\"hi\\"")'), 'or(name.eq."say \\"hi\\"")');
    t.equal(logic('or', '(name.eq."")'), 'or(name.eq."")');
    t.equal(logic('or', '(name.eq.,x.eq.)'), 'or(name.eq."",x.eq."")', 'empty values');
    t.equal(logic('or', '(name.eq.John Smith)'), 'or(name.eq."John Smith")', 'inner space');
    t.equal(logic('or', '(name.eq. x ,b.eq.y )'), 'or(name.eq."x",b.eq."y")', 'trimmed');
    t.equal(logic('or', '(name.eq.a.b.c)'), 'or(name.eq."a.b.c")', 'dots in value');
    t.equal(logic('or', '(name.eq.say "hi")'), 'or(name.eq."say \\"hi\\"")', 'quote inside unquoted value');
    t.equal(logic('or', '(n.like."*,*")'), 'or(n.like."%,%")', 'quoted like');
    t.equal(logic('or', '(f.is."null")'), 'or(f.is.null)');
    t.equal(logic('or', '(t.cs."{a,b}")'), 'or(t.cs."{a,b}")', 'quoted array literal');
    t.equal(logic('or', '(t.cs.{"a,b","c}"},x.eq.1)'), 'or(t.cs."{\\"a,b\\",\\"c}\\"}",x.eq."1")', 'quoted array elements');
    t.equal(logic('or', '(t.cs.{{1,2},{3,4}})'), 'or(t.cs."{{1,2},{3,4}}")', 'nested braces');
    t.equal(logic('or', '(j.cs.{"a":{"b":[1,2]}})'), 'or(j.cs."{\\"a\\":{\\"b\\":[1,2]}}")', 'json');
    t.equal(logic('or', '(t.eq.{a,b})'), 'or(t.eq."{a,b}")', 'array literal for eq');
    t.equal(logic('or', '(r.adj.["2020-01-01 00:00","2020-02-01"))'), 'or(r.adj."[\\"2020-01-01 00:00\\",\\"2020-02-01\\")")');
  });

  t.test('in inside groups', async (t) => {
    const values: Value[] = [];
    const n = parseLogic('or', '(id.in.(1,2,3),and(name.in.("a,b","c)",d),x.eq.1))', false, values);
    t.equal(render(n, values), 'or(id.in.["1","2","3"],and(name.in.["a,b","c)","d"],x.eq."1"))');
    t.same(values, [['1', '2', '3'], ['a,b', 'c)', 'd'], '1']);
    t.equal(logic('or', '(id.in.(),x.eq.1)'), 'or(id.in.[],x.eq."1")');
    t.equal(logic('or', '(id.not.in.( 1 , 2 ))'), 'or(id.not.in.["1","2"])');
  });

  t.test('columns named not / and / or, and quoted columns', async (t) => {
    t.equal(logic('or', '(not.eq.1)'), 'or(not.eq."1")');
    t.equal(logic('or', '(and.eq.1,or.is.null)'), 'or(and.eq."1",or.is.null)');
    t.equal(logic('or', '(not.not.eq.1)'), 'or(not.not.eq."1")', 'column not, negated eq');
    t.equal(logic('or', '("my col".eq.1,"a.b".gt.2)'), 'or(my col.eq."1",a.b.gt."2")');
  });

  t.test('errors', async (t) => {
    for (const raw of [
      '',
      '()',
      '( )',
      'a.eq.1',
      '(a.eq.1',
      '(a.eq.1))',
      '(a.eq.1)x',
      '(a.eq.1,)',
      '(,a.eq.1)',
      '(a.eq.1,,b.eq.2)',
      '(a.foo.1)',
      '(a.EQ.1)',
      '(a.eq)',
      '(a)',
      '(a.eq.1,and())',
      '(a.eq.1,and(b.eq.2)',
      '(and(a.eq.1)b.eq.2)',
      '(not.a.eq.1)',
      '(a.not.not.eq.1)',
      '(a.is.nil)',
      '(a.in.1)',
      '(a.in.(1,2)x)',
      '(a.in.(1,2)',
      '(a.eq."x"y)',
      '(a.eq."unterminated)',
      '(a.cs.{a,b)',
      '(a.cs.a)',
      '(a.sl.[1,2)',
      '(a.sl.1)',
      '(a.sl.[1,2])x)',
      '(books.title.eq.x)',
      '(xor(a.eq.1))',
      '(not.xor(a.eq.1))',
      '(a.fts(english.x)',
    ]) {
      bad(t, () => parseLogic('or', raw), JSON.stringify(raw));
    }
  });

  t.test('nesting limit', async (t) => {
    const ok = '(' + 'and('.repeat(MAX_LOGIC_DEPTH - 1) + 'a.eq.1' + ')'.repeat(MAX_LOGIC_DEPTH - 1) + ')';
    t.ok(parseLogic('and', ok));
    const tooDeep = '(' + 'and('.repeat(MAX_LOGIC_DEPTH) + 'a.eq.1' + ')'.repeat(MAX_LOGIC_DEPTH) + ')';
    bad(t, () => parseLogic('and', tooDeep), 'too deep');
    const huge = '(' + 'or('.repeat(100000) + 'a.eq.1' + ')'.repeat(100000) + ')';
    bad(t, () => parseLogic('and', huge), 'no stack overflow');
  });
});

t.test('order', async (t) => {
  t.same(parseOrder('name'), [{ column: 'name', direction: 'asc', nulls: null }]);
  t.same(parseOrder('name.asc'), [{ column: 'name', direction: 'asc', nulls: null }]);
  t.same(parseOrder('name.desc'), [{ column: 'name', direction: 'desc', nulls: null }]);
  t.same(parseOrder('name.nullsfirst'), [{ column: 'name', direction: 'asc', nulls: 'first' }]);
  t.same(parseOrder('name.desc.nullslast'), [{ column: 'name', direction: 'desc', nulls: 'last' }]);
  t.same(parseOrder('a.desc,b,c.asc.nullsfirst'), [
    { column: 'a', direction: 'desc', nulls: null },
    { column: 'b', direction: 'asc', nulls: null },
    { column: 'c', direction: 'asc', nulls: 'first' },
  ]);
  t.same(parseOrder(' a.desc , b '), [
    { column: 'a', direction: 'desc', nulls: null },
    { column: 'b', direction: 'asc', nulls: null },
  ]);
  t.same(parseOrder('"my col".desc'), [{ column: 'my col', direction: 'desc', nulls: null }]);
  t.same(parseOrder(''), []);
  for (const raw of [
    'a.up',
    'a.DESC',
    'a.desc.asc',
    'a.asc.asc',
    'a.nullsfirst.desc',
    'a.nullsfirst.nullslast',
    'a.nulls',
    'a.',
    '.desc',
    'a,',
    ',a',
    'a,,b',
    'a b',
    'a .desc',
    'a.desc x',
    'a->',
    'a;b',
    'a(b)',
  ]) {
    bad(t, () => parseOrder(raw), JSON.stringify(raw));
  }
});

t.test('limit / offset', async (t) => {
  t.equal(parseLimitOffset('0'), 0);
  t.equal(parseLimitOffset('10'), 10);
  t.equal(parseLimitOffset('007'), 7);
  t.equal(parseLimitOffset('9007199254740991'), 9007199254740991);
  for (const raw of ['', '-1', '+1', '1.5', '1e3', 'ten', ' 1', '1 ', '0x10', '9007199254740992', '99999999999999999999', 'Infinity']) {
    bad(t, () => parseLimitOffset(raw), JSON.stringify(raw));
  }
});

t.test('Prefer', async (t) => {
  t.equal(parsePrefer(undefined), NO_PREFER, 'no header: the shared default');
  t.same(parsePrefer(undefined), { ...NO_PREFER, returnMinimal: false, count: null });
  t.same(parsePrefer(''), { ...NO_PREFER, returnMinimal: false, count: null });
  t.same(parsePrefer('return=minimal'), { ...NO_PREFER, returnMinimal: true, count: null });
  t.same(parsePrefer('return=representation'), { ...NO_PREFER, returnMinimal: false, count: null });
  t.same(parsePrefer('count=exact'), { ...NO_PREFER, returnMinimal: false, count: 'exact' });
  t.same(parsePrefer('count=planned'), { ...NO_PREFER, returnMinimal: false, count: 'planned' });
  t.same(parsePrefer('count=estimated'), { ...NO_PREFER, returnMinimal: false, count: 'estimated' });
  t.same(parsePrefer('return=minimal, count=exact'), { ...NO_PREFER, returnMinimal: true, count: 'exact' });
  t.same(parsePrefer(' Return = Minimal ,COUNT=Exact'), { ...NO_PREFER, returnMinimal: true, count: 'exact' });
  t.same(parsePrefer('resolution=merge-duplicates,return=minimal'), { ...NO_PREFER, returnMinimal: true, count: null, resolution: 'merge' });
  t.same(parsePrefer('resolution=ignore-duplicates'), { ...NO_PREFER, resolution: 'ignore' }, 'read in both modes, used under SUPABASE_COMPAT=true only');
  t.same(parsePrefer('count=bogus, tx=maybe, handling=loose, max-affected=-1, missing=x, return'), NO_PREFER, 'unknown values ignored');
  t.same(parsePrefer('tx=rollback, handling=strict, max-affected=5, missing=default'), {
    ...NO_PREFER,
    tx: 'rollback',
    strict: true,
    maxAffected: 5,
    missingDefault: true,
  });
  t.same(parsePrefer('handling=strict, handling=lenient, missing=default, missing=null, tx=rollback, tx=commit'), { ...NO_PREFER, tx: 'commit' }, 'later tokens win');
  t.same(parsePrefer('return=minimal; x=y'), { ...NO_PREFER, returnMinimal: true, count: null }, 'parameters ignored');
  t.same(parsePrefer(['return=minimal', 'count=planned']), { ...NO_PREFER, returnMinimal: true, count: 'planned' });
  t.same(parsePrefer(',,,'), { ...NO_PREFER, returnMinimal: false, count: null });
});

t.test('parseQuery', async (t) => {
  t.test('everything at once', async (t) => {
    const q = parseQuery(
      new URLSearchParams({
        select: 'id,books(id)',
        age: 'gte.18',
        or: '(a.eq.1,b.is.null)',
        order: 'id.desc',
        limit: '10',
        offset: '20',
        on_conflict: 'id',
        columns: 'a,b',
      }),
    );
    t.equal(sel(q.select), 'id,books(id)');
    t.same(q.filters, [{ kind: 'filter', column: 'age', negated: false, op: 'gte', slot: 0 }]);
    t.equal(q.logic.length, 1);
    t.equal(render(q.logic[0], q.values), 'or(a.eq."1",b.is.null)');
    t.same(q.order, [{ column: 'id', direction: 'desc', nulls: null }]);
    t.equal(q.limit, 10);
    t.equal(q.offset, 20);
    t.same(q.values, ['18', '1']);
  });

  t.test('defaults', async (t) => {
    const q = parseQuery(new URLSearchParams());
    t.equal(q.select, STAR_SELECT);
    t.same(q, { select: STAR_SELECT, filters: [], logic: [], order: [], limit: null, offset: null, values: [] });
    t.equal(parseQuery('select=').select, STAR_SELECT);
  });

  t.test('input forms', async (t) => {
    const expected = parseQuery(new URLSearchParams('a=eq.1&b=in.(x,y)'));
    t.same(parseQuery('a=eq.1&b=in.(x,y)'), expected, 'string');
    t.same(
      parseQuery([
        ['a', 'eq.1'],
        ['b', 'in.(x,y)'],
      ]),
      expected,
      'tuples',
    );
    t.same(parseQuery('name=eq.a%2Cb&x=in.(%22a%2Cb%22)').values, ['a,b', ['a,b']], 'percent-decoded');
  });

  t.test('same column twice: both filters apply', async (t) => {
    const q = parseQuery('age=gte.18&age=lt.65');
    t.same(q.filters, [
      { kind: 'filter', column: 'age', negated: false, op: 'gte', slot: 0 },
      { kind: 'filter', column: 'age', negated: false, op: 'lt', slot: 1 },
    ]);
    t.same(q.values, ['18', '65']);
  });

  t.test('logic params: or, and, not.or, not.and, repeated', async (t) => {
    const q = parseQuery('or=(a.eq.1,b.eq.2)&and=(c.eq.3,d.eq.4)&not.or=(e.eq.5)&not.and=(f.eq.6)&or=(g.eq.7)');
    t.same(
      q.logic.map((l) => render(l, q.values)),
      ['or(a.eq."1",b.eq."2")', 'and(c.eq."3",d.eq."4")', 'not.or(e.eq."5")', 'not.and(f.eq."6")', 'or(g.eq."7")'],
    );
  });

  t.test('filters take slots before logic groups, whatever the parameter order', async (t) => {
    const q = parseQuery('or=(b.eq.2)&a=eq.1&and=(c.in.(3))&d=fts(english).x');
    t.same(q.values, ['1', 'x', 'english', '2', ['3']]);
    t.same(
      q.filters.map((f) => ('slot' in f ? f.slot : -1)),
      [0, 1],
    );
  });

  t.test('errors', async (t) => {
    bad(t, () => parseQuery('a=foo.1'), 'bad operator');
    bad(t, () => parseQuery('a'), 'bare key');
    bad(t, () => parseQuery('a='), 'empty filter');
    bad(t, () => parseQuery('limit=-1'), 'bad limit');
    bad(t, () => parseQuery('offset=x'), 'bad offset');
    bad(t, () => parseQuery('order=a.sideways'), 'bad order');
    bad(t, () => parseQuery('or=a.eq.1'), 'or without parens');
    bad(t, () => parseQuery('not.or=(a.eq.1'), 'bad not.or');
    bad(t, () => parseQuery('select=a&select=b'), 'select twice');
    bad(t, () => parseQuery('order=a&order=b'), 'order twice');
    bad(t, () => parseQuery('limit=1&limit=2'), 'limit twice');
    bad(t, () => parseQuery('offset=1&offset=2'), 'offset twice');
    badEmbed(t, () => parseQuery('select=a(b(c(d(e))))'), 'depth via parseQuery');
    badEmbed(t, () => parseQuery('select=id,books(count)'), 'count via parseQuery');
    bad(t, () => parseQuery('select=a:b::nosuch'), 'bad cast via parseQuery');
  });
});

t.test('shapeOf', async (t) => {
  const shape = (qs: string): string => shapeOf(parseQuery(qs));

  t.test('equal when only values differ', async (t) => {
    const pairs: [string, string][] = [
      ['', 'select=*'],
      ['select=', 'select= '],
      ['a=eq.1', 'a=eq.2'],
      ['a=eq.', 'a=eq.some long value with . and ,'],
      ['a=like.*x*', 'a=like.y'],
      ['a=in.(1)', 'a=in.(1,2,3,4,5)'],
      ['a=in.()', 'a=in.("x,y",z)'],
      ['a=not.in.(1,2)', 'a=not.in.(3)'],
      ['a=cs.{1}', 'a=cs.{1,2,3}'],
      ['a=adj.[1,2]', 'a=adj.(5,9)'],
      ['a=fts.x', 'a=fts.y z'],
      ['a=fts(english).x', 'a=fts(french).y'],
      ['or=(a.eq.1,b.in.(1,2))', 'or=(a.eq.9,b.in.(1,2,3,4))'],
      ['not.and=(a.eq."x,y",or(b.gt.1))', 'not.and=(a.eq.z,or(b.gt.2))'],
      ['limit=1&offset=2', 'limit=100&offset=0'],
      ['select=id,books(id)&order=id.desc&a=eq.1', 'select=id,books(id)&order=id.desc&a=eq.2'],
      ['or=(b.eq.2)&a=eq.1', 'a=eq.3&or=(b.eq.4)'],
    ];
    for (const [x, y] of pairs) t.equal(shape(x), shape(y), `${x} ~ ${y}`);
  });

  t.test('different when structure differs', async (t) => {
    const groups: string[] = [
      '',
      'a=eq.1',
      'a=neq.1',
      'a=not.eq.1',
      'b=eq.1',
      'a=eq.1&a=eq.1',
      'a=is.null',
      'a=is.true',
      'a=not.is.null',
      'a=in.(1)',
      'a=fts.x',
      'a=fts(english).x',
      'a=plfts.x',
      'or=(a.eq.1)',
      'and=(a.eq.1)',
      'not.or=(a.eq.1)',
      'or=(a.eq.1,b.eq.1)',
      'or=(a.eq.1,and(b.eq.1))',
      'or=(a.eq.1,not.and(b.eq.1))',
      'or=(a.eq.1)&or=(b.eq.1)',
      'or=(a.eq.1,b.eq.1)&or=(c.eq.1)',
      'select=id',
      'select=id,name',
      'select=id,books(id)',
      'select=books(id),id',
      'select=*,books(*)',
      'order=a',
      'order=a.desc',
      'order=a.desc.nullslast',
      'order=a,b',
      'limit=1',
      'offset=1',
      'limit=1&offset=1',
      'a%2Cb=eq.1',
      'a=eq.1&b=eq.1',
      'b=eq.1&a=eq.1',
      'select=a,b',
      'select="a,b"',
      'select=c4:x',
    ];
    const seen = new Map<string, string>();
    for (const qs of groups) {
      const s = shape(qs); // every entry parses: one that throws fails the test
      t.notOk(seen.has(s), `${JSON.stringify(qs)} has its own shape` + (seen.has(s) ? ` (same as ${seen.get(s)})` : ''));
      seen.set(s, qs);
    }
  });

  t.test('equal shapes imply equal slot layouts', async (t) => {
    const a = parseQuery('or=(b.eq.2,c.in.(1,2))&a=eq.1&d=fts(english).q');
    const b = parseQuery('a=eq.9&d=fts(simple).r&or=(b.eq.8,c.in.(7))');
    t.equal(shapeOf(a), shapeOf(b));
    t.equal(a.values.length, b.values.length);
    t.same(a.values, ['1', 'q', 'english', '2', ['1', '2']]);
    t.same(b.values, ['9', 'r', 'simple', '8', ['7']]);
  });

  t.test('shape carries no values', async (t) => {
    const s = shape('a=eq.SECRETVALUE&or=(b.in.(SECRET2))&c=like.*SECRET3*');
    t.notMatch(s, /SECRET/);
  });
});

t.test('select: aliases, casts, JSON paths, hints, spreads (issue 17)', async (t) => {
  const values: Value[] = [];
  const n = parseSelect('id, author:authors(name), title::text, n:pages::int8, meta->a, x:meta->>b, meta->list->0, meta->-1', values);
  t.same(n.items[0], { kind: 'column', name: 'id' }, 'a plain column stays {kind, name}');
  t.same(n.items[1], { kind: 'embed', relation: 'authors', select: { items: [{ kind: 'column', name: 'name' }] }, alias: 'author' });
  t.same(n.items[2], { kind: 'column', name: 'title', cast: 'text' });
  t.same(n.items[3], { kind: 'column', name: 'pages', alias: 'n', cast: 'int8' });
  t.same(n.items[4], { kind: 'column', name: 'meta', path: [{ arrow: '->', slot: 0, index: false }], key: 'a' }, 'the last key names the output');
  t.same(n.items[5], { kind: 'column', name: 'meta', alias: 'x', path: [{ arrow: '->>', slot: 1, index: false }] });
  t.same(n.items[6], {
    kind: 'column',
    name: 'meta',
    path: [
      { arrow: '->', slot: 2, index: false },
      { arrow: '->', slot: 3, index: true },
    ],
    key: '0',
  });
  t.same(n.items[7], { kind: 'column', name: 'meta', path: [{ arrow: '->', slot: 4, index: true }], key: '-1' });
  t.same(values, ['a', 'b', 'list', '0', '-1'], 'JSON keys are bound values');

  t.same(parseSelect('reviews!reviews_author_id_fkey(id)').items[0], {
    kind: 'embed',
    relation: 'reviews',
    select: { items: [{ kind: 'column', name: 'id' }] },
    hint: 'reviews_author_id_fkey',
  });
  t.same(parseSelect('by:authors!author_id(*)').items[0], { kind: 'embed', relation: 'authors', select: STAR_SELECT, alias: 'by', hint: 'author_id' });
  t.same(parseSelect('...authors(name)').items[0], { kind: 'embed', relation: 'authors', select: { items: [{ kind: 'column', name: 'name' }] }, spread: true });
  t.same(parseSelect('...authors!author_id(name)').items[0], {
    kind: 'embed',
    relation: 'authors',
    select: { items: [{ kind: 'column', name: 'name' }] },
    hint: 'author_id',
    spread: true,
  });
  t.same(parseSelect('"odd name":"x y"::TEXT').items[0], { kind: 'column', name: 'x y', alias: 'odd name', cast: 'text' }, 'quoted alias and column; cast names any case');
  badEmbed(t, () => parseSelect('a(b(c(...d(e))))'), 'a spread counts toward the depth');
  badEmbed(t, () => parseSelect('books!fk'), 'a hint needs an embed');
  badEmbed(t, () => parseSelect('...books'), 'a spread needs an embed');
  badEmbed(t, () => parseSelect('books!(id)'), 'empty hint');
  t.same(parseSelect('books!inner(id)').items[0], { kind: 'embed', relation: 'books', select: { items: [{ kind: 'column', name: 'id' }] }, inner: true });
  t.same(parseSelect('books!left(id)').items[0], { kind: 'embed', relation: 'books', select: { items: [{ kind: 'column', name: 'id' }] } }, '!left is the default');
  t.same(parseSelect('books!fk!inner(id)').items[0], { kind: 'embed', relation: 'books', select: { items: [{ kind: 'column', name: 'id' }] }, hint: 'fk', inner: true });
  badEmbed(t, () => parseSelect('books!inner!fk(id)'), 'the hint comes first');
  badEmbed(t, () => parseSelect('books!a!b(id)'), 'two hints');
  badEmbed(t, () => parseSelect('books!left!inner(id)'), 'two join types');
  bad(t, () => parseSelect('x:...books(id)'), 'no alias on a spread');
  bad(t, () => parseSelect('a'.repeat(64) + ':id'), 'alias over 63 bytes');
  t.ok(parseSelect('a'.repeat(63) + ':id'), 'alias of 63 bytes');
  bad(t, () => parseSelect('"a\u0000b":id'), 'NUL in an alias');
  bad(t, () => parseSelect('meta->' + 'k'.repeat(64)), 'a JSON key naming the output over 63 bytes');
  t.ok(parseSelect('x:meta->' + 'k'.repeat(64)), 'with an alias the key is only a value');
});

t.test('filters and order with JSON paths, op(any|all)', async (t) => {
  const f = filter('meta->>a', 'eq.1');
  t.same(f.node, { kind: 'filter', column: 'meta', negated: false, op: 'eq', slot: 1, path: [{ arrow: '->>', slot: 0, index: false }] });
  t.same(f.values, ['a', '1'], 'path keys before the value');
  const g = filter('meta->list->0', 'not.is.null');
  t.same(g.node, {
    kind: 'filter',
    column: 'meta',
    negated: true,
    op: 'is',
    value: 'null',
    path: [
      { arrow: '->', slot: 0, index: false },
      { arrow: '->', slot: 1, index: true },
    ],
  });
  t.same(filter('meta->"a->b"', 'eq.1').values, ['a->b', '1'], 'a quoted key may hold an arrow');
  t.same(filter('meta->>k', 'in.(1,2)').node, { kind: 'filter', column: 'meta', negated: false, op: 'in', slot: 1, path: [{ arrow: '->>', slot: 0, index: false }] });
  bad(t, () => filter('meta->', 'eq.1'), 'empty key');
  bad(t, () => filter('->a', 'eq.1'), 'no column');

  const like = filter('name', 'like(all).{a*,*b}');
  t.same(like.node, { kind: 'filter', column: 'name', negated: false, op: 'like', slot: 0, quant: 'all' });
  t.same(like.values, ['{a%,%b}'], '* → % inside the list');
  t.same(filter('name', 'not.ilike(any).{x,y}').node, { kind: 'filter', column: 'name', negated: true, op: 'ilike', slot: 0, quant: 'any' });
  t.same(filter('id', 'gt(any).{1,2}').node, { kind: 'filter', column: 'id', negated: false, op: 'gt', slot: 0, quant: 'any' });
  bad(t, () => filter('name', 'like(all).a*'), 'a quantifier needs a {…} list');

  const values: Value[] = [];
  const grp = parseLogic('or', '(meta->>a.eq.1,name.like(any).{a*,b*})', false, values);
  t.equal(render(grp, values), 'or(meta.eq."1",name.like."{a%,b%}")');
  t.same(values, ['a', '1', '{a%,b%}']);

  const ov: Value[] = [];
  t.same(parseOrder('meta->>a.desc.nullslast,id', ov), [
    { column: 'meta', path: [{ arrow: '->>', slot: 0, index: false }], direction: 'desc', nulls: 'last' },
    { column: 'id', direction: 'asc', nulls: null },
  ]);
  t.same(ov, ['a']);
});

t.test('slots: filters, groups, then select, then order, whatever the parameter order', async (t) => {
  const a = parseQuery('order=meta->>o&select=x:meta->>s&a=eq.1&or=(b.eq.2)');
  const b = parseQuery('a=eq.9&or=(b.eq.8)&select=x:meta->>t&order=meta->>p');
  t.same(a.values, ['1', '2', 's', 'o']);
  t.same(b.values, ['9', '8', 't', 'p']);
  t.equal(shapeOf(a), shapeOf(b), 'JSON keys are values: same shape');
  t.not(shapeOf(parseQuery('select=meta->>s')), shapeOf(parseQuery('select=meta->>t')), 'without an alias the last key names the output, so it is shape');
  const distinct = [
    'select=meta->a',
    'select=meta->>a',
    'select=meta->0',
    'select=x:meta->a',
    'select=meta->a::text',
    'select=id::text',
    'select=id::int8',
    'select=x:id',
    'select=id',
    'select=books(id)',
    'select=b:books(id)',
    'select=books!fk(id)',
    'select=...books(id)',
    'select=books!inner(id)',
    'a=like.x',
    'a=like(any).{x}',
    'a=like(all).{x}',
    'a->>k=eq.1',
    'a->k=eq.1',
    'order=a',
    'order=a->>k',
  ];
  const seen = new Map<string, string>();
  for (const qs of distinct) {
    const s = shapeOf(parseQuery(qs));
    t.notOk(seen.has(s), `${qs} has its own shape` + (seen.has(s) ? ` (same as ${seen.get(s)})` : ''));
    seen.set(s, qs);
  }
});

t.test('embedded parameters (SUPABASE_COMPAT=true)', async (t) => {
  const qs = 'title=eq.a&books.title=eq.b&books.order=id.desc&books.limit=2&books.chapters.position=gt.1&books.not.or=(pages.lt.1)&select=*,books(*,chapters(*)),n:books(count)';
  const q = parseQuery(qs, false, true);
  t.same(q.filters.map((f) => f.column), ['title'], 'the top level keeps its own filters');
  t.same(
    q.embedded?.map((e) => [e.path, e.filters.map((f) => f.column), e.logic.map((l) => l.negated), e.order.length, e.limit]),
    [
      [['books'], ['title'], [true], 1, 2],
      [['books', 'chapters'], ['position'], [], 0, null],
    ],
  );
  // Values after the top level's, in parameter order; limit as text.
  t.same(q.values, ['a', 'b', '2', '1', '1']);
  t.same(q.embedded?.[0].limit, 2, "limit's slot");
  const counted = q.select.items[2];
  t.match(counted, { kind: 'embed', relation: 'books', alias: 'n', select: { items: [{ kind: 'column', name: '*', aggregate: 'count' }] } }, 'rel(count) is count()');
  // The default mode: a dotted key is a column, rel(count) refused.
  t.same(parseQuery('books.title=eq.b').filters.map((f) => f.column), ['books.title']);
  t.throws(() => parseQuery('select=books(count)'), new GrammarError(INVALID_EMBED));
  t.throws(() => parseQuery('books.limit=1&books.limit=2', false, true), new GrammarError(INVALID_REQUEST), 'one limit per level');
  // Two orders of the same parameters lay values out differently: their shapes differ.
  const a = parseQuery('title=eq.a&books.title=eq.b', false, true);
  const b = parseQuery('books.title=eq.b&title=eq.a', false, true);
  t.same(a.values, b.values, 'top level first whatever the order');
  t.not(shapeOf(parseQuery('books.title=eq.b&books.pages=eq.1', false, true)), shapeOf(parseQuery('books.pages=eq.1&books.title=eq.b', false, true)));
  t.not(shapeOf(parseQuery('books.limit=1', false, true)), shapeOf(parseQuery('', false, true)));
});
