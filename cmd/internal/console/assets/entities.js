// Entities as the console handles them: typed properties read from and
// written to the Azure Tables JSON (Name@odata.type annotations), and the
// JSON and CSV formats of export and import.

export const TYPES = ['String', 'Int32', 'Int64', 'Double', 'Boolean', 'DateTime', 'Guid', 'Binary'];
const SYSTEM = new Set(['PartitionKey', 'RowKey', 'Timestamp']);

// parseEntity reads an entity of a full-metadata reply into
// {pk, rk, ts, etag, props: [{name, type, value}]}, every value as text.
export function parseEntity(o) {
  const e = { pk: o.PartitionKey, rk: o.RowKey, ts: o.Timestamp || '', etag: o['odata.etag'] || '', props: [] };
  for (const [k, v] of Object.entries(o)) {
    if (SYSTEM.has(k) || k.startsWith('odata.') || k.includes('@odata.')) continue;
    let type = o[k + '@odata.type'];
    if (type) type = type.replace(/^Edm\./, '');
    else if (typeof v === 'number') type = Number.isInteger(v) ? 'Int32' : 'Double';
    else if (typeof v === 'boolean') type = 'Boolean';
    else type = 'String';
    e.props.push({ name: k, type, value: String(v) });
  }
  return e;
}

const INT = /^-?\d+$/;
const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,7})?(Z|[+-]\d{2}:\d{2})$/;

// typedValue checks a property's text against its type and returns the
// JSON value and whether it needs an annotation; it throws an Error that
// names the property when the text is not of the type.
export function typedValue(name, type, text) {
  const bad = why => { throw new Error(`${name}: ${JSON.stringify(text)} is not ${why}`); };
  switch (type) {
    case 'String': return { v: text, annotate: false };
    case 'Int32': {
      if (!INT.test(text)) bad('an Int32 (a whole number)');
      const n = Number(text);
      if (n < -2147483648 || n > 2147483647) bad('an Int32 (−2³¹ to 2³¹−1)');
      return { v: n, annotate: false };
    }
    case 'Int64': {
      if (!INT.test(text)) bad('an Int64 (a whole number)');
      const n = BigInt(text);
      if (n < -(2n ** 63n) || n >= 2n ** 63n) bad('an Int64 (−2⁶³ to 2⁶³−1)');
      return { v: n.toString(), annotate: true };
    }
    case 'Double': {
      if (text === 'NaN' || text === 'Infinity' || text === '-Infinity') return { v: text, annotate: true };
      const n = Number(text);
      if (text.trim() === '' || !isFinite(n)) bad('a Double (a number)');
      return { v: n, annotate: true };
    }
    case 'Boolean':
      if (text !== 'true' && text !== 'false') bad('a Boolean (true or false)');
      return { v: text === 'true', annotate: false };
    case 'DateTime': {
      if (RFC3339.test(text)) return { v: text, annotate: true };
      const d = new Date(text);
      if (text.trim() === '' || isNaN(d)) bad('a DateTime (as 2024-05-01T12:00:00Z)');
      return { v: d.toISOString(), annotate: true };
    }
    case 'Guid':
      if (!GUID.test(text)) bad('a Guid (as 3f2504e0-4f89-11d3-9a0c-0305e82c3301)');
      return { v: text.toLowerCase(), annotate: true };
    case 'Binary':
      try { atob(text); } catch { bad('Binary (base64)'); }
      return { v: text, annotate: true };
  }
  throw new Error(`${name}: unknown type ${type}`);
}

// toJSON builds the JSON body of an entity from keys and typed
// properties; it throws (naming the property) on a value not of its type
// or a repeated or reserved name.
export function toJSON(pk, rk, props) {
  const o = { PartitionKey: pk, RowKey: rk };
  const seen = new Set();
  for (const p of props) {
    if (!p.name) throw new Error('a property needs a name');
    if (SYSTEM.has(p.name) || p.name.startsWith('odata.')) throw new Error(`${p.name} is a reserved name`);
    if (seen.has(p.name)) throw new Error(`${p.name} is named twice`);
    seen.add(p.name);
    const { v, annotate } = typedValue(p.name, p.type, p.value);
    if (annotate) o[p.name + '@odata.type'] = 'Edm.' + p.type;
    o[p.name] = v;
  }
  return o;
}

// exportJSON is the JSON export of entities: an array of objects in the
// Tables API's shape (with type annotations), which import reads back.
export function exportJSON(entities) {
  return JSON.stringify(entities.map(e => {
    const o = toJSON(e.pk, e.rk, e.props);
    if (e.ts) return Object.assign({ PartitionKey: e.pk, RowKey: e.rk, Timestamp: e.ts }, o);
    return o;
  }), null, 2);
}

// columns lists the property names of entities in order of appearance
// with their types ('mixed' when they differ).
export function columns(entities) {
  const cols = new Map();
  for (const e of entities) {
    for (const p of e.props) {
      const t = cols.get(p.name);
      cols.set(p.name, t === undefined || t === p.type ? p.type : 'mixed');
    }
  }
  return [...cols.entries()].map(([name, type]) => ({ name, type }));
}

// A cell starting with = + - @, a tab or a carriage return is run as a
// formula by spreadsheets (OWASP, CSV injection: "=HYPERLINK(…)" sends
// the sheet's data away when clicked, "=cmd|…" starts programs). Such a
// cell is written with a single quote first, which makes it text, and
// quoted, as OWASP advises; so is a cell that starts with a quote, so that
// import can tell the quotes export added from the data's own.
const FORMULA_START = /^[=+\-@\t\r']/;
const NEUTRALISED = /^'[=+\-@\t\r']/;

// The numeric types' values are not neutralised when they are plain
// numbers ("-5", "-1.5e-7"): the console writes them from typed values,
// never from a user's text, and a spreadsheet reads them as the numbers
// they are. "-Infinity" is not a plain number and is neutralised.
const NUMERIC = new Set(['Int32', 'Int64', 'Double']);
const PLAIN_NUMBER = /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/;

// neutralise returns a cell's text with a single quote first if a
// spreadsheet would run it; type is the type of the value (a key's is
// String).
function neutralise(s, type) {
  if (!FORMULA_START.test(s) || (NUMERIC.has(type) && PLAIN_NUMBER.test(s))) return s;
  return "'" + s;
}

// restore undoes neutralise on an imported cell: a quote before one of
// the characters neutralise puts a quote before is dropped. (A file from
// elsewhere whose cell starts so loses that quote too.)
function restore(s) {
  return NEUTRALISED.test(s) ? s.slice(1) : s;
}

// csvCell writes one cell of a value of type: neutralised, and quoted
// when neutralised or when it holds a quote, a comma or a line break.
function csvCell(v, type = 'String') {
  const s = v === undefined || v === null ? '' : String(v);
  const n = neutralise(s, type);
  return n !== s || /[",\r\n]/.test(n) ? '"' + n.replaceAll('"', '""') + '"' : n;
}

// exportCSV is the CSV export: PartitionKey, RowKey, Timestamp, then per
// property its value and its type ("Name@type"), as Azure Storage
// Explorer writes them, every cell a spreadsheet would run neutralised
// (csvCell).
export function exportCSV(entities) {
  const cols = columns(entities);
  const head = ['PartitionKey', 'RowKey', 'Timestamp'];
  for (const c of cols) head.push(c.name, c.name + '@type');
  const lines = [head.map(h => csvCell(h)).join(',')];
  for (const e of entities) {
    const byName = new Map(e.props.map(p => [p.name, p]));
    const row = [csvCell(e.pk), csvCell(e.rk), csvCell(e.ts, 'DateTime')];
    for (const c of cols) {
      const p = byName.get(c.name);
      row.push(p ? csvCell(p.value, p.type) : '', p ? csvCell('Edm.' + p.type) : '');
    }
    lines.push(row.join(','));
  }
  return lines.join('\r\n') + '\r\n';
}

// parseCSV reads RFC 4180 CSV into rows of cells.
export function parseCSV(text) {
  const rows = [];
  let row = [], cell = '', i = 0, quoted = false;
  while (i < text.length) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i += 2; continue; }
      if (c === '"') { quoted = false; i++; continue; }
      cell += c; i++; continue;
    }
    if (c === '"' && cell === '') { quoted = true; i++; continue; }
    if (c === ',') { row.push(cell); cell = ''; i++; continue; }
    if (c === '\r' || c === '\n') {
      row.push(cell); cell = '';
      if (row.length > 1 || row[0] !== '') rows.push(row);
      row = [];
      i += c === '\r' && text[i + 1] === '\n' ? 2 : 1;
      continue;
    }
    cell += c; i++;
  }
  if (quoted) throw new Error('the CSV ends inside a quoted cell');
  row.push(cell);
  if (row.length > 1 || row[0] !== '') rows.push(row);
  return rows;
}

// importEntities reads an import file (JSON: an array of entities in the
// Tables API's shape, or {"value": [...]}; CSV: as exportCSV writes it,
// its neutralised cells restored) into [{pk, rk, props}]; it throws on a
// file it cannot read.
export function importEntities(name, text) {
  if (/\.csv$/i.test(name)) {
    const rows = parseCSV(text).map(r => r.map(restore));
    if (rows.length === 0) return [];
    const head = rows[0];
    const pkAt = head.indexOf('PartitionKey'), rkAt = head.indexOf('RowKey');
    if (pkAt < 0 || rkAt < 0) throw new Error('the CSV header needs PartitionKey and RowKey columns');
    const typeAt = new Map(head.map((h, i) => [h, i]).filter(([h]) => h.endsWith('@type')).map(([h, i]) => [h.slice(0, -5), i]));
    return rows.slice(1).map((r, n) => {
      const props = [];
      head.forEach((h, i) => {
        if (SYSTEM.has(h) || h.endsWith('@type') || r[i] === undefined || r[i] === '') return;
        const t = typeAt.has(h) ? (r[typeAt.get(h)] || 'Edm.String').replace(/^Edm\./, '') : 'String';
        if (!TYPES.includes(t)) throw new Error(`row ${n + 2}: ${h} has the unknown type ${t}`);
        props.push({ name: h, type: t, value: r[i] });
      });
      return { pk: r[pkAt] || '', rk: r[rkAt] || '', props };
    });
  }
  let data = JSON.parse(text);
  if (data && !Array.isArray(data) && Array.isArray(data.value)) data = data.value;
  if (!Array.isArray(data)) throw new Error('the JSON must be an array of entities');
  return data.map((o, n) => {
    if (!o || typeof o !== 'object' || typeof o.PartitionKey !== 'string' || typeof o.RowKey !== 'string') {
      throw new Error(`entity ${n + 1} needs PartitionKey and RowKey strings`);
    }
    const e = parseEntity(o);
    return { pk: e.pk, rk: e.rk, props: e.props };
  });
}

// VALUE_REF starts a String property that refers to a large value
// (docs/VALUES.md: the prefix is reserved).
const VALUE_REF = 'cairn-value:';

// isValueRef tells whether a String's text is a large value's reference.
export function isValueRef(text) { return typeof text === 'string' && text.startsWith(VALUE_REF); }

// keyPath is the path segment naming one entity: (PartitionKey='…',RowKey='…').
export function keyPath(pk, rk) {
  const q = s => encodeURIComponent(s.replaceAll("'", "''"));
  return `(PartitionKey='${q(pk)}',RowKey='${q(rk)}')`;
}

// quoteFilter quotes a string for a $filter.
export function quoteFilter(s) { return "'" + s.replaceAll("'", "''") + "'"; }
