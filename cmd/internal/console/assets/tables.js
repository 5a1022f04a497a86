// The tables pane: the account's tables, a query builder with paging, a
// typed results grid, the entity editor, export and import. Every call
// goes to the Tables API's operator door, /$cairn/tables/<account>/….

import { api, el, fill, toast, describe, confirmDialog, download, badge, fmtTime, fetchBytes } from './lib.js';
import { TYPES, parseEntity, toJSON, exportJSON, exportCSV, columns, importEntities, keyPath, quoteFilter, isValueRef } from './entities.js';

const ACCOUNT_KEY = 'cairn.account';
const FULL = 'application/json;odata=fullmetadata';

const DEV_ACCOUNT = 'devstoreaccount1';

// A table's load is read every LOAD_EVERY ms while its page is shown, its
// LOAD_TOP busiest partitions listed; one partition with at least
// HOT_SHARE of at least HOT_MIN_WRITES writes is flagged hot.
const LOAD_EVERY = 2000;
const LOAD_TOP = 10;
const HOT_SHARE = 0.5;
const HOT_MIN_WRITES = 100;

// fmtBytes shows a size in bytes, KiB, MiB or GiB.
function fmtBytes(n) {
  const units = ['bytes', 'KiB', 'MiB', 'GiB'];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
  return (u === 0 ? String(n) : n.toFixed(1)) + ' ' + units[u];
}

function account() { return sessionStorage.getItem(ACCOUNT_KEY) || DEV_ACCOUNT; }
function base() { return '/$cairn/tables/' + encodeURIComponent(account()) + '/'; }

// tableLink is a link to a table's (or projection's) page in an account:
// following it makes that account the current one.
export function tableLink(acct, name, attrs = {}) {
  return el('a', Object.assign({ href: '#/tables/' + encodeURIComponent(name), onclick: () => sessionStorage.setItem(ACCOUNT_KEY, acct || DEV_ACCOUNT) }, attrs), name);
}

// projectionAccount is the account of a projection by its full name
// (docs/PROJECTIONS.md: "contoso.ByEmail", or a bare name in the
// development account).
export function projectionAccount(full) {
  const dot = (full || '').indexOf('.');
  return dot < 0 ? DEV_ACCOUNT : full.slice(0, dot);
}

// listProjections reads the declared projections of the current account
// as this node has them (GET /$cairn/projections): they are read like
// tables but are not in the account's list of tables.
async function listProjections() {
  const d = (await api('/$cairn/projections')).data || {};
  const acct = account().toLowerCase();
  return (d.status || []).filter(p => projectionAccount(p.full || p.name).toLowerCase() === acct)
    .sort((a, b) => a.name.localeCompare(b.name));
}

// listTables reads every page of the account's tables.
async function listTables() {
  const names = [];
  let next = '';
  do {
    const r = await api(base() + 'Tables' + (next ? '?NextTableName=' + encodeURIComponent(next) : ''));
    for (const t of r.data.value || []) names.push(t.TableName);
    next = r.headers.get('x-ms-continuation-NextTableName') || '';
  } while (next);
  return names.sort((a, b) => a.localeCompare(b));
}

export async function tablesPage(root, args) {
  const current = args[0] || '';
  const [names, projections] = await Promise.all([listTables(), listProjections()]);
  const list = el('ul', { id: 'table-list', class: 'side-list' }, names.length === 0
    ? el('li', { class: 'muted' }, 'No tables yet.')
    : names.map(n => el('li', { class: n === current ? 'active' : '' }, el('a', { href: '#/tables/' + encodeURIComponent(n) }, n))));
  const plist = projections.length === 0 ? null : [
    el('div', { class: 'side-head' }, el('span', { title: 'Declared indexes and aggregates: read-only, queried like tables' }, 'Projections ', badge(String(projections.length)))),
    el('ul', { id: 'projection-list', class: 'side-list' }, projections.map(p =>
      el('li', { class: p.name === current ? 'active' : '' }, el('a', { href: '#/tables/' + encodeURIComponent(p.name), class: 'projection', title: p.kind + ' of ' + p.source + ', read-only' }, p.name, ' ', el('span', { class: 'muted small' }, p.kind))))),
  ];
  const createErr = el('p', { id: 'create-table-error', class: 'error', hidden: true });
  const nameInput = el('input', { id: 'new-table-name', placeholder: 'NewTable', pattern: '[A-Za-z][A-Za-z0-9]{2,62}', required: true, title: '3 to 63 letters and digits, starting with a letter' });
  const createForm = el('form', { id: 'new-table-form', class: 'inline-form', hidden: true, onsubmit: async ev => {
    ev.preventDefault();
    const name = nameInput.value.trim();
    try {
      await api(base() + 'Tables', { method: 'POST', body: { TableName: name }, headers: { Prefer: 'return-no-content' } });
      toast('Table ' + name + ' created');
      location.hash = '#/tables/' + encodeURIComponent(name);
    } catch (err) {
      createErr.hidden = false;
      createErr.textContent = describe(err);
    }
  } }, nameInput, el('button', { id: 'create-table', type: 'submit', class: 'primary' }, 'Create'), createErr);
  const accountInput = el('input', { id: 'account', value: account(), onchange: () => {
    sessionStorage.setItem(ACCOUNT_KEY, accountInput.value.trim() || 'devstoreaccount1');
    if (location.hash !== '#/tables') { location.hash = '#/tables'; return; } // the route renders it
    tablesPage(root, []).catch(err => fill(root, el('p', { class: 'error' }, describe(err))));
  } });
  const side = el('aside', { class: 'sidebar' },
    el('label', { class: 'account' }, 'Account', accountInput),
    el('div', { class: 'side-head' }, el('span', null, 'Tables ', badge(String(names.length))),
      el('button', { id: 'new-table', class: 'ghost small', onclick: () => { createForm.hidden = !createForm.hidden; nameInput.focus(); } }, '+ New table')),
    createForm, list, plist);
  const pane = el('section', { class: 'pane' });
  fill(root, el('div', { class: 'tables-layout' }, side, pane));
  if (!current) {
    fill(pane, el('div', { class: 'hint' }, el('h1', null, 'Tables'),
      el('p', null, 'Pick a table on the left, or create one. Queries, paging, the entity editor, export and import are on the table\'s page.')));
    return;
  }
  const projection = projections.find(p => p.name.toLowerCase() === current.toLowerCase());
  if (projection) {
    new TableView(pane, projection.name, projection).render();
    return;
  }
  if (!names.some(n => n.toLowerCase() === current.toLowerCase())) {
    fill(pane, el('p', { class: 'error' }, 'There is no table or projection named ' + current + ' in ' + account() + '.'));
    return;
  }
  new TableView(pane, current).render();
}

// TableView is one table's page, or a declared projection's (projection:
// its status from GET /$cairn/projections), which is read-only: queries,
// paging and export, but no editor, import or delete (the server refuses
// writes to it with ProjectionReadOnly).
class TableView {
  constructor(root, name, projection = null) {
    this.root = root;
    this.name = name;
    this.projection = projection;
    this.entities = []; // the page shown
    this.next = null; // continuation of the page shown
    this.page = 0;
    this.selected = -1;
  }

  path(suffix = '') { return base() + encodeURIComponent(this.name) + suffix; }

  render() {
    const input = (id, label, attrs) => el('label', null, label, el('input', Object.assign({ id }, attrs)));
    this.form = el('form', { id: 'query-form', class: 'query', onsubmit: ev => { ev.preventDefault(); this.query(); } },
      input('q-pk', 'PartitionKey', { placeholder: 'equals…' }),
      input('q-rk', 'RowKey', { placeholder: 'equals…' }),
      input('q-filter', '$filter', { placeholder: "Age gt 30 and Name eq 'x'", class: 'wide' }),
      input('q-select', '$select', { placeholder: 'Name,Age' }),
      input('q-top', '$top', { type: 'number', min: 1, max: 1000, value: '100' }),
      el('button', { id: 'q-run', type: 'submit', class: 'primary' }, 'Run query'));
    this.info = el('span', { id: 'page-info', class: 'muted' });
    this.nextBtn = el('button', { id: 'next-page', disabled: true, onclick: () => this.query(this.next) }, 'Next page ›');
    this.firstBtn = el('button', { id: 'first-page', disabled: true, onclick: () => this.query() }, '« First page');
    this.editBtn = el('button', { id: 'edit-entity', disabled: true, onclick: () => this.edit(this.entities[this.selected]) }, 'Edit');
    this.delBtn = el('button', { id: 'delete-entity', disabled: true, onclick: () => this.deleteEntity(this.entities[this.selected]) }, 'Delete');
    const fileInput = el('input', { id: 'import-file', type: 'file', accept: '.json,.csv,application/json,text/csv', hidden: true, onchange: () => {
      if (fileInput.files[0]) this.importFile(fileInput.files[0]);
      fileInput.value = '';
    } });
    this.progress = el('div', { id: 'import-progress', class: 'progress', hidden: true }, el('progress', { max: 1, value: 0 }), el('span'));
    this.grid = el('div', { class: 'grid-wrap' });
    this.history = el('span', { id: 'table-history', class: 'muted' });
    this.loadSummary = el('summary', { id: 'table-load-summary' }, 'Load');
    this.loadBody = el('div');
    this.load = el('details', { id: 'table-load', class: 'load' }, this.loadSummary, this.loadBody);
    const exports = [
      el('button', { id: 'export-json', onclick: () => this.exportAll('json') }, 'Export JSON'),
      el('button', { id: 'export-csv', onclick: () => this.exportAll('csv') }, 'Export CSV'),
    ];
    const p = this.projection;
    if (p) {
      fill(this.root,
        el('div', { class: 'page-head' }, el('h1', null, this.name), badge('projection · read-only', 'info'), el('span', { class: 'muted' }, account()),
          el('span', { id: 'projection-info', class: 'muted' }, p.kind + ' of ', tableLink(account(), p.source), ' · version ' + p.version + ' · ' + p.state),
          el('span', { class: 'spacer' }), el('a', { class: 'button', href: '#/projections' }, 'Projections')),
        el('p', { class: 'muted small' }, 'Derived by the node from the journal of ' + p.source + ' and kept exact; it cannot be written to (docs/PROJECTIONS.md). Query and export it as a table.'),
        this.form,
        el('div', { class: 'toolbar' }, exports, el('span', { class: 'spacer' }), this.info, this.firstBtn, this.nextBtn),
        this.grid);
      this.query();
      return;
    }
    fill(this.root,
      el('div', { class: 'page-head' }, el('h1', null, this.name), el('span', { class: 'muted' }, account()), this.history, el('span', { class: 'spacer' }),
        el('button', { id: 'delete-table', class: 'danger', onclick: () => this.deleteTable() }, 'Delete table')),
      this.form,
      el('div', { class: 'toolbar' },
        el('button', { id: 'add-entity', class: 'primary', onclick: () => this.edit(null) }, '+ Add entity'),
        this.editBtn, this.delBtn,
        el('span', { class: 'sep' }),
        exports,
        el('button', { id: 'import', onclick: () => fileInput.click() }, 'Import…'), fileInput,
        el('span', { class: 'spacer' }), this.info, this.firstBtn, this.nextBtn),
      this.progress, this.load, this.grid);
    this.query();
    this.showHistory();
    this.followLoad();
  }

  // followLoad shows the table's load ($load: writes from the journal,
  // reads on this node) and reads it again every loadEvery ms while the
  // page shows this table, so that a hot partition shows within seconds.
  async followLoad() {
    const shown = () => this.root.isConnected && this.root.contains(this.load) &&
      location.hash === '#/tables/' + encodeURIComponent(this.name);
    while (shown()) {
      try {
        const r = await api(base() + '$load?table=' + encodeURIComponent(this.name) + '&top=' + LOAD_TOP);
        if (!shown()) return;
        this.showLoad((r.data.tables || [])[0]);
      } catch (err) {
        this.loadSummary.textContent = 'Load: ' + describe(err);
      }
      await new Promise(done => setTimeout(done, LOAD_EVERY));
    }
  }

  // showLoad shows a table's load: its totals in the summary, with the
  // hottest partition's share of the writes and a warning when one
  // partition takes most of them (the guide's prepend/append
  // anti-pattern), and its top partitions in the table below.
  showLoad(l) {
    if (!l) return;
    const hot = (l.hot || []).slice().sort((a, b) => b.writes - a.writes || a.partitionKey.localeCompare(b.partitionKey));
    const share = p => l.writes > 0 ? p.writes / l.writes : 0;
    const pct = x => (100 * x).toFixed(1) + ' %';
    const top = hot[0];
    const parts = ['Load: ' + l.partitions + ' partition' + (l.partitions === 1 ? '' : 's'), l.writes + ' writes', l.reads + ' reads on this node'];
    if (top && l.writes > 0) parts.push('most written: ' + top.partitionKey + ' (' + pct(share(top)) + ' of writes)');
    const warn = top && l.writes >= HOT_MIN_WRITES && share(top) >= HOT_SHARE;
    fill(this.loadSummary, parts.join(' · '), warn ? [' ', badge('hot partition', 'warn')] : null);
    this.loadSummary.title = warn
      ? 'One partition takes ' + pct(share(top)) + ' of the writes: every write to a partition goes through one journal subject and one committer, so it bounds the table\'s write rate. Spread the keys (examples/hotpartition).'
      : 'Writes count every commit in the journal since the table was created; reads count this node\'s reads since it started.';
    fill(this.loadBody, hot.length === 0 ? el('p', { class: 'muted small' }, 'No writes yet.') :
      el('table', { id: 'load-partitions', class: 'grid' },
        el('thead', null, el('tr', null, ['PartitionKey', 'writes', 'share of writes', 'reads', 'entities', 'records'].map(h => el('th', null, h)))),
        el('tbody', null, hot.map(p => el('tr', null,
          el('td', null, p.partitionKey), el('td', null, String(p.writes)), el('td', null, pct(share(p))),
          el('td', null, String(p.reads)), el('td', null, String(p.entities)), el('td', null, String(p.records)))))));
  }

  // showHistory shows how much of its journal the table keeps: its
  // retention and its horizon, the first position a change feed or an
  // as-of read can still ask for.
  async showHistory() {
    try {
      const r = await api(base() + '$history?table=' + encodeURIComponent(this.name));
      const h = (r.data.tables || [])[0];
      if (!h) return;
      this.history.textContent = `journal from position ${h.horizon} · keeps ${h.retention === 'all' ? 'everything' : h.retention}${h.own ? '' : ' (default)'} · ${h.records} records`;
      this.history.title = `Records before position ${h.horizon} were pruned: the change feed and as-of reads start there. Set the retention with: host history set ${this.name} <all | 7d | 1000000 | default>`;
    } catch (err) {
      this.history.textContent = '';
    }
  }

  // queryString builds the query's parameters from the form; top
  // overrides $top (export reads with pages of 1,000).
  queryString(top) {
    const v = id => this.form.querySelector('#' + id).value.trim();
    const parts = [];
    if (v('q-pk')) parts.push('PartitionKey eq ' + quoteFilter(v('q-pk')));
    if (v('q-rk')) parts.push('RowKey eq ' + quoteFilter(v('q-rk')));
    if (v('q-filter')) parts.push(parts.length ? '(' + v('q-filter') + ')' : v('q-filter'));
    const q = new URLSearchParams();
    if (parts.length) q.set('$filter', parts.join(' and '));
    if (v('q-select')) q.set('$select', v('q-select'));
    if (top || v('q-top')) q.set('$top', top || v('q-top'));
    return q;
  }

  async fetchPage(q, next) {
    if (next) { q.set('NextPartitionKey', next.pk); q.set('NextRowKey', next.rk); }
    const r = await api(this.path('()?' + q.toString().replaceAll('+', '%20')), { headers: { Accept: FULL } });
    const pk = r.headers.get('x-ms-continuation-NextPartitionKey');
    return { entities: (r.data.value || []).map(parseEntity), next: pk ? { pk, rk: r.headers.get('x-ms-continuation-NextRowKey') || '' } : null };
  }

  // query runs the form's query: its first page, or the page after next.
  async query(next) {
    this.info.textContent = 'Querying…';
    try {
      const p = await this.fetchPage(this.queryString(), next);
      this.page = next ? this.page + 1 : 1;
      this.entities = p.entities;
      this.next = p.next;
      this.select(-1);
      this.renderGrid();
    } catch (err) {
      this.info.textContent = '';
      this.entities = [];
      this.next = null;
      this.select(-1);
      this.nextBtn.disabled = true;
      fill(this.grid, el('p', { id: 'query-error', class: 'error' }, describe(err)));
    }
  }

  renderGrid() {
    const cols = columns(this.entities);
    const head = el('tr', null, el('th', null, 'PartitionKey'), el('th', null, 'RowKey'),
      cols.map(c => el('th', { title: c.type }, c.name, ' ', el('span', { class: 'type t-' + c.type }, c.type))),
      el('th', null, 'Timestamp'));
    const rows = this.entities.map((e, i) => {
      const byName = new Map(e.props.map(p => [p.name, p]));
      return el('tr', { dataset: { index: i }, onclick: () => this.select(i), ondblclick: this.projection ? null : () => this.edit(e) },
        el('td', { class: 'key' }, e.pk), el('td', { class: 'key' }, e.rk),
        cols.map(c => {
          const p = byName.get(c.name);
          if (!p) return el('td', { class: 'absent' }, '');
          if (p.type === 'String' && isValueRef(p.value)) return this.valueCell(e, p);
          return el('td', { class: 'v-' + p.type, title: p.type }, p.value);
        }),
        el('td', { class: 'muted' }, fmtTime(e.ts)));
    });
    fill(this.grid, el('table', { id: 'results', class: 'grid' }, el('thead', null, head),
      el('tbody', null, rows.length ? rows : el('tr', null, el('td', { colspan: cols.length + 3, class: 'empty' }, 'No entities match.')))));
    this.info.textContent = `Page ${this.page} · ${this.entities.length} ${this.entities.length === 1 ? 'entity' : 'entities'}` + (this.next ? ' · more' : '');
    this.nextBtn.disabled = !this.next;
    this.firstBtn.disabled = this.page <= 1;
  }

  // valueCell shows a property holding a large value's reference
  // (docs/VALUES.md): a badge, the reference, and a link that downloads
  // the value through the operator door (…/$value/<Property>).
  valueCell(e, p) {
    const link = el('a', {
      href: '#', class: 'value-download', title: 'Download the value ' + p.value,
      onclick: ev => { ev.preventDefault(); ev.stopPropagation(); this.downloadValue(e, p.name, link); },
    }, 'download');
    return el('td', { class: 'v-String value-ref', title: p.value },
      badge('large value', 'info'), link, ' ', el('span', { class: 'muted ref' }, p.value));
  }

  async downloadValue(e, prop, link) {
    link.classList.add('busy');
    try {
      const blob = await fetchBytes(this.path(keyPath(e.pk, e.rk) + '/$value/' + encodeURIComponent(prop)));
      download(`${this.name}-${e.pk}-${e.rk}-${prop}.bin`, 'application/octet-stream', blob);
      toast(`${prop} of ${e.pk}/${e.rk}: ${fmtBytes(blob.size)} downloaded`);
    } catch (err) {
      toast(describe(err), 'error');
    } finally {
      link.classList.remove('busy');
    }
  }

  select(i) {
    this.selected = i;
    for (const tr of this.grid.querySelectorAll('tbody tr')) tr.classList.toggle('selected', Number(tr.dataset.index) === i);
    this.editBtn.disabled = this.delBtn.disabled = i < 0;
  }

  async deleteTable() {
    if (!await confirmDialog('Delete table ' + this.name + '?', 'Every entity in ' + this.name + ' is deleted with it. This cannot be undone.', 'Delete table')) return;
    try {
      await api(base() + "Tables('" + encodeURIComponent(this.name) + "')", { method: 'DELETE' });
      toast('Table ' + this.name + ' deleted');
      location.hash = '#/tables';
    } catch (err) {
      toast(describe(err), 'error');
    }
  }

  async deleteEntity(e) {
    if (!e || !await confirmDialog('Delete this entity?', `PartitionKey ${e.pk}, RowKey ${e.rk}`, 'Delete')) return;
    try {
      await api(this.path(keyPath(e.pk, e.rk)), { method: 'DELETE', headers: { 'If-Match': e.etag } });
      toast('Entity deleted');
      this.query();
    } catch (err) {
      if (err.status === 412) toast('Not deleted: the entity was changed by someone else since it was loaded. Run the query again to see it.', 'error');
      else toast(describe(err), 'error');
    }
  }

  // edit opens the editor: on a new entity (e null), or on the current
  // version of e read again by its keys, so that a grid read with $select
  // (some properties only) cannot replace the entity with part of it.
  async edit(e) {
    if (this.projection) return; // read-only
    if (!e) { new Editor(this, null).open(); return; }
    try {
      const r = await api(this.path(keyPath(e.pk, e.rk)), { headers: { Accept: FULL } });
      // Left meanwhile (another table, Back): the editor belongs to a
      // page no longer shown.
      if (!this.root.isConnected) return;
      new Editor(this, parseEntity(r.data)).open();
    } catch (err) {
      toast(err.status === 404 ? 'The entity was deleted by someone else: run the query again.' : describe(err), 'error');
    }
  }

  // readAll follows the query's pages (1,000 entities each) to the end.
  async readAll(onPage) {
    const out = [];
    let next = null;
    do {
      const p = await this.fetchPage(this.queryString('1000'), next);
      out.push(...p.entities);
      next = p.next;
      onPage(out.length);
    } while (next);
    return out;
  }

  async exportAll(kind) {
    try {
      const all = await this.readAll(n => { this.info.textContent = `Exporting… ${n} entities read`; });
      const stamp = new Date().toISOString().replace(/[:.]/g, '-');
      if (kind === 'json') download(`${this.name}-${stamp}.json`, 'application/json', exportJSON(all));
      else download(`${this.name}-${stamp}.csv`, 'text/csv', exportCSV(all));
      this.info.textContent = `Exported ${all.length} entities`;
      toast(`Exported ${all.length} entities as ${kind.toUpperCase()}`);
    } catch (err) {
      toast('Export failed: ' + describe(err), 'error');
    }
  }

  // importFile writes every entity of a JSON or CSV file (insert or
  // replace, four at a time), showing the progress; failures are listed
  // and the rest go on.
  async importFile(file) {
    let ents;
    try {
      ents = importEntities(file.name, await file.text());
    } catch (err) {
      toast('Import: ' + file.name + ': ' + describe(err), 'error');
      return;
    }
    const bar = this.progress.querySelector('progress'), label = this.progress.querySelector('span');
    this.progress.hidden = false;
    this.progress.classList.remove('done', 'failed');
    bar.max = Math.max(ents.length, 1);
    bar.value = 0;
    let done = 0;
    const failures = [];
    const show = () => { label.textContent = `Importing ${file.name}: ${done} of ${ents.length}` + (failures.length ? ` (${failures.length} failed)` : ''); };
    show();
    let at = 0;
    const worker = async () => {
      while (at < ents.length) {
        const e = ents[at++];
        try {
          await api(this.path(keyPath(e.pk, e.rk)), { method: 'PUT', body: toJSON(e.pk, e.rk, e.props) });
        } catch (err) {
          failures.push(`${e.pk}/${e.rk}: ${describe(err)}`);
        }
        done++;
        bar.value = done;
        show();
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    this.progress.classList.add(failures.length ? 'failed' : 'done');
    label.textContent = `Imported ${done - failures.length} of ${ents.length} entities from ${file.name}` +
      (failures.length ? `; ${failures.length} failed: ${failures.slice(0, 3).join('; ')}${failures.length > 3 ? '; …' : ''}` : '');
    this.query();
  }
}

// Editor is the typed entity editor: a new entity (e null) or an
// existing one, replaced with If-Match on its ETag so that a change made
// meanwhile by someone else is shown instead of overwritten.
class Editor {
  constructor(view, e) {
    this.view = view;
    this.e = e;
  }

  open() {
    const e = this.e;
    this.pk = el('input', { id: 'ed-pk', value: e ? e.pk : '', disabled: !!e, required: true });
    this.rk = el('input', { id: 'ed-rk', value: e ? e.rk : '', disabled: !!e, required: true });
    this.rows = el('tbody', { id: 'ed-props' });
    this.err = el('p', { id: 'ed-error', class: 'error', hidden: true });
    this.conflict = el('div', { id: 'ed-conflict', class: 'conflict', hidden: true },
      el('strong', null, 'Changed by someone else. '),
      el('span', null, 'This entity was changed (or deleted) since you opened it, so your change was not saved. Reload it to see the current version, then make your change again.'),
      el('button', { id: 'ed-reload', type: 'button', onclick: () => this.reload() }, 'Reload'));
    this.etagLine = el('span', { id: 'ed-etag', class: 'muted small' });
    this.d = el('dialog', { id: 'editor', class: 'editor' },
      el('form', { method: 'dialog', onsubmit: ev => { ev.preventDefault(); this.save(); } },
        el('h2', null, e ? 'Edit entity' : 'Add entity', ' ', this.etagLine),
        el('div', { class: 'keys' }, el('label', null, 'PartitionKey', this.pk), el('label', null, 'RowKey', this.rk)),
        el('table', { class: 'props' }, el('thead', null, el('tr', null, el('th', null, 'Property'), el('th', null, 'Type'), el('th', null, 'Value'), el('th'))), this.rows),
        el('button', { id: 'ed-add-prop', type: 'button', class: 'ghost', onclick: () => this.addRow({ name: '', type: 'String', value: '' }).querySelector('.prop-name').focus() }, '+ Add property'),
        this.conflict, this.err,
        el('div', { class: 'actions' },
          e ? el('button', { id: 'ed-delete', type: 'button', class: 'danger left', onclick: () => this.remove() }, 'Delete') : null,
          el('button', { id: 'ed-cancel', type: 'button', onclick: () => this.close() }, 'Cancel'),
          el('button', { id: 'ed-save', type: 'submit', class: 'primary' }, e ? 'Save' : 'Insert'))));
    this.setEntity(e);
    document.body.append(this.d);
    this.d.addEventListener('close', () => this.d.remove());
    this.d.showModal();
  }

  setEntity(e) {
    this.rows.replaceChildren();
    this.etag = e ? e.etag : '';
    this.etagLine.textContent = e ? 'ETag ' + decodeURIComponent(e.etag) : '';
    for (const p of e ? e.props : []) this.addRow(p);
    if (!e) this.addRow({ name: '', type: 'String', value: '' });
  }

  addRow(p) {
    const type = el('select', { class: 'prop-type' }, TYPES.map(t => el('option', { value: t, selected: t === p.type }, t)));
    const tr = el('tr', { class: 'prop-row' },
      el('td', null, el('input', { class: 'prop-name', value: p.name, placeholder: 'Name' })),
      el('td', null, type),
      el('td', null, el('input', { class: 'prop-value', value: p.value, placeholder: placeholder(p.type) })),
      el('td', null, el('button', { type: 'button', class: 'ghost small', title: 'Remove the property', onclick: () => tr.remove() }, '✕')));
    type.addEventListener('change', () => { tr.querySelector('.prop-value').placeholder = placeholder(type.value); });
    this.rows.append(tr);
    return tr;
  }

  props() {
    return [...this.rows.querySelectorAll('tr')].map(tr => ({
      name: tr.querySelector('.prop-name').value.trim(),
      type: tr.querySelector('.prop-type').value,
      value: tr.querySelector('.prop-value').value,
    })).filter(p => p.name !== '' || p.value !== '');
  }

  showError(msg) {
    this.err.hidden = !msg;
    this.err.textContent = msg || '';
  }

  async save() {
    this.showError('');
    this.conflict.hidden = true;
    let body;
    try {
      body = toJSON(this.pk.value, this.rk.value, this.props());
    } catch (err) {
      this.showError(err.message);
      return;
    }
    const v = this.view;
    try {
      if (this.e) {
        await api(v.path(keyPath(this.e.pk, this.e.rk)), { method: 'PUT', body, headers: { 'If-Match': this.etag } });
      } else {
        await api(v.path(''), { method: 'POST', body, headers: { Prefer: 'return-no-content' } });
      }
    } catch (err) {
      if (err.status === 412) { this.conflict.hidden = false; return; }
      if (err.status === 409 && !this.e) { this.showError('An entity with this PartitionKey and RowKey exists already (' + describe(err) + ').'); return; }
      this.showError(describe(err));
      return;
    }
    toast(this.e ? 'Entity saved' : 'Entity inserted');
    this.close();
    v.query();
  }

  async reload() {
    try {
      const r = await api(this.view.path(keyPath(this.e.pk, this.e.rk)), { headers: { Accept: FULL } });
      this.e = parseEntity(r.data);
      this.setEntity(this.e);
      this.conflict.hidden = true;
      this.showError('');
      toast('Reloaded the current version');
    } catch (err) {
      this.showError(err.status === 404 ? 'The entity was deleted by someone else.' : describe(err));
    }
  }

  async remove() {
    try {
      await api(this.view.path(keyPath(this.e.pk, this.e.rk)), { method: 'DELETE', headers: { 'If-Match': this.etag } });
    } catch (err) {
      if (err.status === 412) { this.conflict.hidden = false; return; }
      this.showError(describe(err));
      return;
    }
    toast('Entity deleted');
    this.close();
    this.view.query();
  }

  close() { this.d.close(); }
}

function placeholder(type) {
  return {
    String: 'text', Int32: '42', Int64: '9007199254740993', Double: '3.14', Boolean: 'true or false',
    DateTime: '2024-05-01T12:00:00Z', Guid: '3f2504e0-4f89-11d3-9a0c-0305e82c3301', Binary: 'base64',
  }[type];
}
