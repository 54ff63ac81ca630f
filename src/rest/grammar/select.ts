/** The `select` parameter: items, aliases, casts, JSON paths, embeds and spreads. (The whole grammar: ../grammar.ts.) */
import { MAX_EMBED_DEPTH, MAX_ALIAS_BYTES, CASTS, AGGREGATES, STAR_SELECT, type Value, type JsonStep, type Aggregate, type SelectItem, type SelectNode } from './ast.ts';
import { C_LPAREN, C_RPAREN, C_STAR, C_COMMA, C_DOT, C_COLON, C_BANG, invalid, invalidEmbed, skipWs, readName, readPath, readWord, type Cursor } from './scan.ts';

/**
 * Parses the `select` parameter. Absent, empty or blank → `STAR_SELECT`.
 * Embed errors (depth > 3, `rel(count)`, `rel()`, unbalanced parens) → `invalid embed in request`;
 * other syntax errors → `invalid request`.
 */
export function parseSelect(select: string | undefined | null, values: Value[] = [], compat = false): SelectNode {
  if (select == null) return STAR_SELECT;
  const c: Cursor = compat ? { s: select, i: 0, compat } : { s: select, i: 0 };
  skipWs(c);
  if (c.i === select.length) return STAR_SELECT;
  const node = parseSelectList(c, 0, values);
  // parseSelectList at depth 0 stops only at end of input or a stray ')'.
  if (c.i < select.length) throw invalidEmbed();
  return node;
}

/** Parses items up to end of input (depth 0) or the closing ')' (depth > 0, left unconsumed). */
export function parseSelectList(c: Cursor, depth: number, values: Value[]): SelectNode {
  const s = c.s;
  const items: SelectItem[] = [];
  for (;;) {
    skipWs(c);
    items.push(parseSelectItem(c, depth, values));
    skipWs(c);
    if (c.i >= s.length) {
      if (depth > 0) throw invalidEmbed(); // unclosed '('
      break;
    }
    const ch = s.charCodeAt(c.i);
    if (ch === C_COMMA) {
      c.i++;
      continue;
    }
    if (ch === C_RPAREN) break; // end of embed, or a stray ')' at depth 0 (caller rejects)
    if (ch === C_LPAREN) throw invalidEmbed(); // `*(id)`
    throw invalid();
  }
  return { items };
}

/** An alias or JSON key that names an output column: at most 63 bytes, no NUL. */
export function isOutputName(name: string): boolean {
  return Buffer.byteLength(name) <= MAX_ALIAS_BYTES && !name.includes('\u0000');
}

export function parseSelectItem(c: Cursor, depth: number, values: Value[]): SelectItem {
  const s = c.s;
  const ch = s.charCodeAt(c.i);
  if (ch === C_STAR) {
    c.i++;
    return STAR_SELECT.items[0];
  }
  if (ch === C_LPAREN || ch === C_RPAREN) throw invalidEmbed(); // `(id)`, `a,)`
  const spread = s.startsWith('...', c.i);
  if (spread) c.i += 3;
  let name = readName(c);
  if (name === '') throw invalid(); // empty item or a character that cannot start a name
  let alias: string | undefined;
  if (s.charCodeAt(c.i) === C_COLON && s.charCodeAt(c.i + 1) !== C_COLON) {
    // `alias:` — not on a spread, whose columns keep their own names.
    if (spread || !isOutputName(name)) throw invalid();
    alias = name;
    c.i++;
    skipWs(c);
    name = readName(c);
    if (name === '') throw invalid();
  }
  let hint: string | undefined;
  let join: string | undefined;
  if (s.charCodeAt(c.i) === C_BANG) {
    // `!hint`, `!inner` / `!left`, or `!hint!inner`.
    while (s.charCodeAt(c.i) === C_BANG) {
      c.i++;
      const w = readName(c);
      if (w === '') throw invalidEmbed();
      if (w === 'inner' || w === 'left') {
        if (join !== undefined) throw invalidEmbed();
        join = w;
      } else {
        if (hint !== undefined || join !== undefined) throw invalidEmbed();
        hint = w;
      }
    }
    skipWs(c);
    if (s.charCodeAt(c.i) !== C_LPAREN) throw invalidEmbed(); // a hint only on an embed
  }
  if (!spread && hint === undefined && join === undefined) {
    const last = { key: '' };
    const path = readPath(c, values, last);
    let cast: string | undefined;
    let aggregate: Aggregate | undefined;
    if (s.charCodeAt(c.i) === C_DOT) {
      // `.sum()`: an aggregate of the field (the parentheses are empty).
      c.i++;
      const w = readWord(c);
      if (!AGGREGATES.has(w) || s.charCodeAt(c.i) !== C_LPAREN || s.charCodeAt(c.i + 1) !== C_RPAREN) throw invalid();
      c.i += 2;
      aggregate = w as Aggregate;
    }
    if (s.charCodeAt(c.i) === C_COLON && s.charCodeAt(c.i + 1) === C_COLON) {
      c.i += 2;
      const w = readName(c).toLowerCase();
      if (!Object.hasOwn(CASTS, w)) throw invalid();
      cast = w;
    }
    skipWs(c);
    if (s.charCodeAt(c.i) !== C_LPAREN || path !== null || cast !== undefined || aggregate !== undefined) {
      const item: { kind: 'column'; name: string; alias?: string; path?: JsonStep[]; key?: string; cast?: string; aggregate?: Aggregate } = {
        kind: 'column',
        name,
      };
      if (aggregate !== undefined) item.aggregate = aggregate;
      if (alias !== undefined) item.alias = alias;
      if (path !== null) {
        item.path = path;
        if (alias === undefined) {
          if (!isOutputName(last.key)) throw invalid();
          item.key = last.key;
        }
      }
      if (cast !== undefined) item.cast = cast;
      return item;
    }
  }
  // Embed.
  if (s.charCodeAt(c.i) !== C_LPAREN) throw invalidEmbed(); // `...rel` without a list
  if (depth + 1 > MAX_EMBED_DEPTH) throw invalidEmbed();
  c.i++;
  skipWs(c);
  if (c.i >= s.length) throw invalidEmbed(); // `rel(`
  // `rel()`: an empty embed (no columns; with `!inner` it narrows the rows).
  const inner: SelectNode = s.charCodeAt(c.i) === C_RPAREN ? { items: [] } : parseSelectList(c, depth + 1, values);
  c.i++; // the ')' that ends the list
  if (inner.items.length === 0 && name === 'count' && !spread && hint === undefined && join === undefined) {
    // `count()`: the number of rows (of the group), an aggregate; `::cast` may follow.
    const item: { kind: 'column'; name: string; alias?: string; cast?: string; aggregate: Aggregate } = { kind: 'column', name: '*', aggregate: 'count' };
    if (alias !== undefined) item.alias = alias;
    if (s.charCodeAt(c.i) === C_COLON && s.charCodeAt(c.i + 1) === C_COLON) {
      c.i += 2;
      const w = readName(c).toLowerCase();
      if (!Object.hasOwn(CASTS, w)) throw invalid();
      item.cast = w;
    }
    return item;
  }
  let select = inner;
  if (inner.items.length === 1) {
    const only = inner.items[0];
    if (only.kind === 'column' && only.name === 'count' && only.path === undefined) {
      // `rel(count)`: refused, or (SUPABASE_COMPAT=true, as PostgREST) `rel(count())`, the related rows' count.
      if (c.compat !== true || only.aggregate !== undefined || only.cast !== undefined) throw invalidEmbed();
      select = { items: [only.alias === undefined ? { kind: 'column', name: '*', aggregate: 'count' } : { kind: 'column', name: '*', aggregate: 'count', alias: only.alias }] };
    }
  }
  const embed: { kind: 'embed'; relation: string; select: SelectNode; alias?: string; hint?: string; spread?: true; inner?: true } = {
    kind: 'embed',
    relation: name,
    select,
  };
  if (alias !== undefined) embed.alias = alias;
  if (hint !== undefined) embed.hint = hint;
  if (spread) embed.spread = true;
  if (join === 'inner') embed.inner = true;
  return embed;
}
