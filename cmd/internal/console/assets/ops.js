// The operators' pages: functions, queues and poison messages, declared
// projections and the outbox, read from the operators' API.

import { api, el, fill, toast, describe, confirmDialog, dataTable, badge, pageHeader, fmtTime, ago, b64text } from './lib.js';
import { tableLink, projectionAccount } from './tables.js';
import { routesSection, keysSection, settingsSection } from './fnconfig.js';

const refreshButton = (fn) => el('button', { class: 'refresh', onclick: () => fn().catch(err => toast(describe(err), 'error')) }, '↻ Refresh');

function trigger(t) {
  if (!t) return '';
  if (t.queue) return ['queue ', el('a', { href: '#/queues/' + encodeURIComponent(t.queue) }, t.queue)];
  if (t.table) return 'table ' + t.table;
  if (t.every) return 'every ' + t.every;
  if (t.cron) return 'cron ' + t.cron;
  return 'direct';
}

function stat(label, value, kind, id) {
  return el('div', { class: 'stat ' + (kind || ''), id }, el('div', { class: 'stat-value' }, String(value)), el('div', { class: 'stat-label' }, label));
}

// poisonQueues names the poison queues a function's failures go to
// (docs/FUNCTIONS.md): its queue's, its change feed's, its timer's.
function poisonQueues(f) {
  const t = f.trigger || {};
  const qs = [];
  if (t.queue) qs.push(t.queue + '-poison');
  if (t.table) qs.push(f.name + '-changes-poison');
  if (t.every || t.cron) qs.push('timer-' + f.name + '-poison');
  return qs;
}

// plural is "1 message", "2 messages".
export function plural(n, one, many) { return n + ' ' + (n === 1 ? one : (many || one + 's')); }

// functionsPage lists the deployed functions with their load errors, the
// node's counters and their rates, and a function's details: its history
// with rollback, its HTTP routes and keys, its settings and secrets
// (fnconfig.js), a test invocation and its latest log lines. While the page
// is open it reads the counters again every 5 s (the toggle stops it).
export async function functionsPage(root) {
  let open = ''; // the function whose details are shown
  let prev = null; // the previous reading of the counters, for the rates
  let readings = 0;
  const stats = el('div', { id: 'fn-stats' });
  const list = el('div', { id: 'fn-list' });
  const detail = el('div', { id: 'fn-detail' });
  const auto = el('input', { type: 'checkbox', id: 'auto-refresh', checked: true });
  const logs = el('div', { id: 'fn-logs' });
  const load = async () => {
    const [fns, st, qs] = await Promise.all([api('/$cairn/functions'), api('/$cairn/runner'), api('/$cairn/queues')]);
    const s = st.data, now = performance.now();
    // The counters are the node's, in memory since it started; the poison
    // queues' depths are read from the queues themselves, which a restart
    // keeps: the two disagree after a restart, and each says what it is.
    const depth = {};
    for (const q of qs.data || []) depth[q.name] = q.depth;
    const waiting = (qs.data || []).filter(q => q.poison).reduce((n, q) => n + q.depth, 0);
    const since = s.since ? fmtTime(s.since) + ' (' + ago(s.since) + ')' : 'it started';
    const per = {};
    for (const f of fns.data || []) per[f.name] = f;
    // A rate is the change of a counter between two readings over the
    // time between them: '…' until there are two.
    const rate = (cur, old) => prev && cur >= old ? ((cur - old) / ((now - prev.at) / 1000)).toFixed(2) + '/s' : '…';
    const old = prev || { s, per };
    readings++;
    fill(stats,
      el('div', { class: 'stats', dataset: { readings } },
        stat('loaded on this node', s.loaded), stat('invocations', s.invocations), stat('failures', s.failures, s.failures ? 'warn' : ''),
        el('div', { class: 'stat rate', id: 'rate-invocations' }, el('div', { class: 'stat-value' }, rate(s.invocations, old.s.invocations)), el('div', { class: 'stat-label' }, 'invocations/s')),
        el('div', { class: 'stat rate', id: 'rate-failures' }, el('div', { class: 'stat-value' }, rate(s.failures, old.s.failures)), el('div', { class: 'stat-label' }, 'failures/s')),
        stat('poisoned', s.poisoned, s.poisoned ? 'warn' : ''), stat('throttled', s.throttled), stat('refused (full queue)', s.queueFull + s.backlogRefused),
        stat('in poison queues now', waiting, waiting ? 'bad' : '', 'poison-waiting')),
      el('p', { id: 'fn-since', class: 'muted small' }, 'Invocations, failures, poisoned, throttled and refused count on this node since it started, ' + since +
        ' (runs include retries; a restart starts them at 0). What the poison queues hold now is read from the queues, across restarts and nodes. Rates are from the last two readings.'));
    // poisonCell shows what a function's poison queues hold now: those
    // holding messages, or its first one (empty).
    const poisonCell = f => {
      const all = poisonQueues(f);
      const shown = all.filter(q => depth[q]);
      if (shown.length === 0 && all.length > 0) shown.push(all[0]);
      return shown.map(q => el('div', { class: 'fn-poison' },
        el('a', { href: '#/queues/' + encodeURIComponent(q), class: depth[q] ? 'bad-text' : '' }, plural(depth[q] || 0, 'message')), el('span', { class: 'muted small' }, ' in ' + q)));
    };
    const fnRate = (f, k) => rate(f[k] || 0, (old.per[f.name] || {})[k] || 0);
    fill(list, dataTable([
      ['Name', f => el('strong', null, f.name)],
      ['Version', f => String(f.version || '')],
      ['Trigger', f => trigger(f.trigger)],
      ['Deployed', f => f.deployed ? fmtTime(f.deployed) : ''],
      ['Module', f => f.builtin ? badge('built-in ' + f.builtin, 'info') : el('code', null, (f.digest || '').slice(0, 12))],
      ['Runs since start', f => String(f.invocations || 0)],
      ['Failures since start', f => el('span', { class: f.failures ? 'warn-text' : '' }, String(f.failures || 0))],
      ['Poisoned since start', f => el('span', { class: f.poisoned ? 'bad-text' : '' }, String(f.poisoned || 0))],
      ['In poison queue now', poisonCell],
      ['Runs/s · failures/s', f => el('span', { class: 'fn-rate' }, fnRate(f, 'invocations') + ' · ' + fnRate(f, 'failures'))],
      ['Status', f => f.loadError ? el('span', { class: 'error' }, badge('load failed', 'bad'), ' ', f.loadError) : badge('loaded', 'ok')],
      ['', f => el('button', { class: 'small details', onclick: () => showDetail(f).catch(err => toast(describe(err), 'error')) }, (f.builtin ? '' : 'History · ') + (f.trigger && f.trigger.http ? 'Routes · keys · ' : '') + 'Settings · invoke · logs')],
    ], fns.data || [], { class: 'functions', empty: 'No functions are deployed.' }));
    prev = { at: now, s, per };
    if (open && per[open]) await showLogs(open).catch(err => fill(logs, el('p', { class: 'error' }, describe(err))));
  };
  const showLogs = async name => {
    const ls = (await api('/$cairn/functions/' + encodeURIComponent(name) + '/logs')).data || [];
    fill(logs, dataTable([
      ['Time', l => fmtTime(l.time)],
      ['Version', l => String(l.version || '')],
      ['Trigger', l => el('code', { class: 'small' }, l.trigger)],
      ['Line', l => el('pre', { class: 'body' }, l.line)],
    ], ls.slice().reverse(), { class: 'fn-logs', empty: 'No log lines from ' + name + ' on this node since it started.' }));
  };
  const showDetail = async f => {
    const name = f.name;
    open = name;
    const parts = [];
    if (!f.builtin) {
      const h = (await api('/$cairn/functions/' + encodeURIComponent(name) + '/history')).data;
      const cur = h[h.length - 1];
      parts.push(el('h2', null, 'History of ' + name),
        dataTable([
          ['Version', m => String(m.version)],
          ['Deployed', m => fmtTime(m.deployed)],
          ['Module', m => m.builtin ? 'built-in ' + m.builtin : (m.digest || '').slice(0, 12)],
          ['Size', m => !m.size ? '' : m.size < 1024 ? m.size + ' B' : (m.size / 1024).toFixed(1) + ' KiB'],
          ['', m => m === cur ? badge('current', 'ok') : el('button', { class: 'small rollback', onclick: async () => {
            if (!await confirmDialog('Roll back ' + name + ' to version ' + m.version + '?', 'Its module and settings become the current version again (as a new version); every node loads it.', 'Roll back')) return;
            try {
              const r = await api('/$cairn/functions/' + encodeURIComponent(name) + '/rollback?version=' + m.version, { method: 'POST' });
              toast(name + ' is now version ' + r.data.version + ' (the module of version ' + m.version + ')');
              await load();
              await showDetail(Object.assign({}, f, { version: r.data.version }));
            } catch (err) { toast(describe(err), 'error'); }
          } }, 'Roll back to this')],
        ], h.slice().reverse(), { class: 'history' }));
    }
    // Its routes and keys (for a function with HTTP routes), its
    // settings and secrets (any function may read them).
    const loads = [];
    const http = f.trigger && f.trigger.http;
    if (http) {
      const keys = keysSection(name);
      parts.push(routesSection(f), keys.section);
      loads.push(keys.load);
    }
    const settings = settingsSection(name);
    parts.push(settings.section);
    loads.push(settings.load);
    const body = el('textarea', { id: 'invoke-body', rows: 3, placeholder: 'trigger body (text or JSON)' });
    const result = el('div', { id: 'invoke-result' });
    parts.push(el('h2', null, 'Test invoke ' + name),
      el('p', { class: 'muted small' }, 'Sends the body to the function\'s direct subject (<prefix>.fn.' + name + ', as any client does): one invocation, not retried, whose writes are real.'),
      el('form', { id: 'invoke-form', class: 'enqueue', onsubmit: async ev => {
        ev.preventDefault();
        fill(result, el('p', { class: 'loading' }, 'Invoking…'));
        try {
          const r = (await api('/$cairn/functions/' + encodeURIComponent(name) + '/invoke', { method: 'POST', body: body.value, headers: { 'Content-Type': 'application/octet-stream' } })).data;
          fill(result, r.error
            ? el('div', { class: 'invoke-error' }, badge('failed', 'bad'), ' after ' + r.durationMs.toFixed(1) + ' ms: ', el('span', { class: 'error' }, r.error))
            : el('div', { class: 'invoke-reply' }, badge('ok', 'ok'), ' reply after ' + r.durationMs.toFixed(1) + ' ms', el('pre', { class: 'body' }, b64text(r.output) || '(empty)')));
          await showLogs(name);
        } catch (err) { fill(result, el('p', { class: 'error' }, describe(err))); }
      } }, el('label', null, 'Trigger body', body), el('button', { id: 'invoke', type: 'submit', class: 'primary' }, 'Invoke')),
      result,
      el('h2', null, 'Latest log lines of ' + name, ' ', el('button', { class: 'small', id: 'refresh-logs', onclick: () => showLogs(name).catch(err => toast(describe(err), 'error')) }, '↻')),
      el('p', { class: 'muted small' }, 'The last 100 lines the function logged on this node, newest first.'),
      logs);
    fill(detail, parts);
    await Promise.all([
      showLogs(name).catch(err => fill(logs, el('p', { class: 'error' }, describe(err)))),
      ...loads.map(l => l().catch(err => toast(describe(err), 'error'))),
    ]);
  };
  fill(root,
    pageHeader('Functions', el('label', { class: 'toggle', title: 'Read the counters every 5 s while this page is open' }, auto, ' Auto refresh (5 s)'), refreshButton(load)),
    stats, list, detail);
  await load();
  // The timer ends when the page is left or the toggle is off.
  const timer = setInterval(() => {
    if (!root.contains(list) || root.dataset.page !== 'functions' || location.hash.replace(/^#\/?/, '').split('/')[0] !== 'functions') { clearInterval(timer); return; }
    if (auto.checked) load().catch(err => toast(describe(err), 'error'));
  }, 5000);
}

// queuesPage lists the queues with their depths; a queue's page peeks at
// its messages and enqueues; a poison queue's lists its messages with
// their errors, to requeue or delete.
// age formats a number of seconds as the largest unit or two: 42 s, 3 min 5 s, 2 h 10 min.
function age(secs) {
  const s = Math.round(secs);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

export async function queuesPage(root, args) {
  if (args[0]) return queuePage(root, args[0]);
  const load = async () => {
    const qs = (await api('/$cairn/queues')).data || [];
    const name = el('input', { id: 'enqueue-queue', placeholder: 'queue', required: true, pattern: '[A-Za-z0-9_-]+' });
    fill(root,
      pageHeader('Queues', refreshButton(load)),
      dataTable([
        ['Queue', q => el('a', { href: '#/queues/' + encodeURIComponent(q.name), class: q.poison ? 'poison' : '' }, q.name)],
        ['Depth', q => el('span', { class: q.poison && q.depth ? 'bad-text' : '' }, String(q.depth))],
        ['Oldest message', q => q.depth && q.oldestAgeSeconds ? el('span', { title: q.oldest }, age(q.oldestAgeSeconds)) : ''],
        ['Kind', q => q.poison ? badge('poison', 'bad') : badge('queue', 'info')],
        ['Function', q => q.function || ''],
      ], qs, { class: 'queues', empty: 'No queue holds messages and no function reads one.' }),
      el('form', { class: 'inline-form', onsubmit: ev => { ev.preventDefault(); location.hash = '#/queues/' + encodeURIComponent(name.value.trim()); } },
        el('span', null, 'Open a queue:'), name, el('button', { type: 'submit' }, 'Open')));
  };
  await load();
}

async function queuePage(root, queue) {
  const poison = queue.endsWith('-poison');
  const path = '/$cairn/queues/' + encodeURIComponent(queue);
  const load = async () => {
    if (poison) {
      const ps = (await api(path + '?limit=200')).data || [];
      fill(root,
        el('p', { class: 'crumbs' }, el('a', { href: '#/queues' }, 'Queues'), ' › ', queue),
        pageHeader('Poison queue ' + queue, refreshButton(load)),
        el('p', { class: 'muted' }, 'Messages a function gave up on, each with its last error. Requeue puts one back on its queue (its attempts start again); delete drops it.'),
        bulkForm(ps),
        el('div', { id: 'poison-list', class: 'cards' }, ps.length === 0 ? el('p', { class: 'empty' }, 'No poison messages.') : ps.map(p =>
          el('div', { class: 'card poison-msg', dataset: { seq: p.seq } },
            el('div', { class: 'card-head' }, el('strong', null, '#' + p.seq), ' from ', el('code', null, p.queue), ' · function ', el('code', null, p.function),
              el('span', { class: 'spacer' }),
              el('button', { class: 'requeue', onclick: () => act('requeue', p) }, 'Requeue'),
              el('button', { class: 'danger delete', onclick: () => act('delete', p) }, 'Delete')),
            el('div', { class: 'poison-error' }, p.error),
            el('dl', { class: 'facts' },
              el('dt', null, 'Attempts'), el('dd', null, String(p.attempts)),
              el('dt', null, 'Enqueued'), el('dd', null, fmtTime(p.enqueued)),
              el('dt', null, 'Poisoned'), el('dd', null, fmtTime(p.poisoned) + ' (' + ago(p.poisoned) + ')')),
            el('pre', { class: 'body' }, b64text(p.body))))));
    } else {
      const ms = (await api(path + '/peek?limit=100')).data || [];
      const body = el('textarea', { id: 'enqueue-body', rows: 4, placeholder: 'message body (text or JSON)' });
      fill(root,
        el('p', { class: 'crumbs' }, el('a', { href: '#/queues' }, 'Queues'), ' › ', queue),
        pageHeader('Queue ' + queue, el('a', { class: 'button', href: '#/queues/' + encodeURIComponent(queue + '-poison') }, 'Poison messages'),
          el('button', { id: 'purge', class: 'danger', onclick: purge }, 'Purge…'), refreshButton(load)),
        el('form', { id: 'enqueue-form', class: 'enqueue', onsubmit: async ev => {
          ev.preventDefault();
          try {
            await api(path, { method: 'POST', body: body.value, headers: { 'Content-Type': 'application/octet-stream' } });
            toast('Message enqueued on ' + queue);
            await load();
          } catch (err) { toast(describe(err), 'error'); }
        } }, el('label', null, 'Enqueue a message', body), el('button', { id: 'enqueue', type: 'submit', class: 'primary' }, 'Enqueue')),
        el('h2', null, 'Waiting messages ', badge(String(ms.length))),
        el('p', { class: 'muted small' }, 'A peek: messages stay on the queue (those being processed are shown too).'),
        dataTable([
          ['Seq', m => String(m.seq)],
          ['Stored', m => fmtTime(m.time)],
          ['Body', m => el('pre', { class: 'body' }, b64text(m.body))],
        ], ms, { class: 'peek', empty: 'The queue is empty.' }));
    }
  };
  // purge removes every message of the queue, once the operator confirmed
  // with its name and depth before them.
  const purge = async () => {
    try {
      const q = ((await api('/$cairn/queues')).data || []).find(q => q.name === queue);
      const depth = q ? q.depth : 0;
      if (!await confirmDialog('Purge queue ' + queue + '?', 'All ' + depth + ' message' + (depth === 1 ? '' : 's') + ' waiting on ' + queue + ' (those being processed included) are removed for good.', 'Purge ' + queue)) return;
      const r = await api(path + '/purge', { method: 'POST' });
      toast('Purged ' + r.data.purged + ' message' + (r.data.purged === 1 ? '' : 's') + ' from ' + queue);
      await load();
    } catch (err) { toast(describe(err), 'error'); }
  };
  // bulkForm requeues or deletes the poison messages a filter selects (the
  // error contains a text, and/or enqueued or poisoned before a time); it
  // counts those of the listed messages that match as the filter changes.
  const bulkForm = ps => {
    const text = el('input', { id: 'bulk-error', placeholder: 'error contains…' });
    const by = el('select', { id: 'bulk-by' }, el('option', { value: 'poisonedBefore' }, 'poisoned before'), el('option', { value: 'enqueuedBefore' }, 'enqueued before'));
    const before = el('input', { id: 'bulk-before', type: 'datetime-local', step: 1 });
    const count = el('span', { id: 'bulk-match', class: 'muted small' });
    const filter = () => {
      const f = {};
      if (text.value) f.error = text.value;
      if (before.value) f[by.value] = new Date(before.value).toISOString();
      return f;
    };
    const matches = p => {
      const f = filter();
      if (f.error && !(p.error || '').includes(f.error)) return false;
      if (f.poisonedBefore && !(new Date(p.poisoned) < new Date(f.poisonedBefore))) return false;
      if (f.enqueuedBefore && !(new Date(p.enqueued) < new Date(f.enqueuedBefore))) return false;
      return true;
    };
    const recount = () => { count.textContent = matchSentence(ps.filter(matches).length, ps.length, 200); };
    const run = async what => {
      const f = filter();
      const all = Object.keys(f).length === 0;
      const which = all ? 'every poison message of ' + queue : 'the poison messages of ' + queue + ' whose ' +
        [f.error && 'error contains "' + f.error + '"', f.poisonedBefore && 'poisoning was before ' + fmtTime(f.poisonedBefore), f.enqueuedBefore && 'first enqueue was before ' + fmtTime(f.enqueuedBefore)].filter(Boolean).join(' and ');
      const verb = what === 'requeue' ? 'Requeue' : 'Delete';
      if (!await confirmDialog(verb + ' matching poison messages of ' + queue + '?', verb + ' ' + which + '. ' + count.textContent + ' At most 10,000 are ' + (what === 'requeue' ? 'requeued' : 'deleted') + ' per request. ' + (what === 'requeue' ? 'Each goes back on its queue with its attempts starting again.' : 'Their bodies and errors are lost.'), verb)) return;
      try {
        const qs = new URLSearchParams(all ? { all: 'true' } : f);
        const r = (await api(path + '/' + what + '?' + qs, { method: 'POST' })).data;
        const msg = (what === 'requeue' ? 'Requeued ' : 'Deleted ') + r.affected + ' message' + (r.affected === 1 ? '' : 's') +
          (r.skipped ? ', skipped ' + r.skipped + ' that do not name their queue' : '') + (r.more ? '; more match: run it again' : '');
        await load();
        toast(msg);
        const out = document.getElementById('bulk-result');
        if (out) out.textContent = msg;
      } catch (err) { toast(describe(err), 'error'); }
    };
    for (const i of [text, by, before]) i.addEventListener('input', recount);
    recount();
    return el('form', { id: 'bulk-form', class: 'inline-form bulk', onsubmit: ev => ev.preventDefault() },
      el('strong', null, 'Bulk:'), text, by, before,
      el('button', { id: 'bulk-requeue', type: 'button', onclick: () => run('requeue') }, 'Requeue matching'),
      el('button', { id: 'bulk-delete', type: 'button', class: 'danger', onclick: () => run('delete') }, 'Delete matching'),
      count, el('span', { id: 'bulk-result', class: 'small' }));
  };
  const act = async (what, p) => {
    if (what === 'delete' && !await confirmDialog('Delete poison message #' + p.seq + '?', 'Its body and error are lost.', 'Delete')) return;
    try {
      await api(path + '/' + p.seq + (what === 'requeue' ? '/requeue' : ''), { method: what === 'requeue' ? 'POST' : 'DELETE' });
      toast(what === 'requeue' ? 'Message #' + p.seq + ' requeued on ' + p.queue : 'Message #' + p.seq + ' deleted');
      await load();
    } catch (err) { toast(describe(err), 'error'); }
  };
  await load();
}

// matchSentence says how many of the listed poison messages a filter
// matches, as a sentence: "1 of the 3 listed messages matches.", "All 2
// listed messages match.", "The one listed message does not match."; a
// list cut at limit may leave more in the queue.
export function matchSentence(n, listed, limit) {
  let s;
  if (listed === 0) s = 'No messages are listed.';
  else if (listed === 1) s = n === 1 ? 'The one listed message matches.' : 'The one listed message does not match.';
  else if (n === listed) s = 'All ' + listed + ' listed messages match.';
  else if (n === 0) s = 'None of the ' + listed + ' listed messages match.';
  else s = n + ' of the ' + listed + ' listed messages ' + (n === 1 ? 'matches.' : 'match.');
  if (limit && listed >= limit) s += ' Only the first ' + limit + ' are listed: the queue may hold more.';
  return s;
}

const stateKind = { active: 'ok', building: 'info', rebuilding: 'info', faulted: 'bad', 'no-source': 'warn' };

// projectionsPage shows the declared projections and where each stands
// on this node and on the others.
export async function projectionsPage(root) {
  const load = async () => {
    const d = (await api('/$cairn/projections')).data;
    const status = d.status || [];
    fill(root,
      pageHeader('Projections', refreshButton(load)),
      el('p', { class: 'muted' }, 'Declared indexes and aggregates (host projections deploy). State and lag as this node (' + d.node + ') has them.'),
      dataTable([
        ['Projection', p => el('strong', null, tableLink(projectionAccount(p.full || p.name), p.name, { class: 'open-projection', title: 'Open ' + p.name + ' as a read-only table' }))],
        ['Source', p => p.source],
        ['Kind', p => p.kind],
        ['Version', p => p.version + (p.declared !== p.version ? ' (declared ' + p.declared + ')' : '')],
        ['State', p => badge(p.state, stateKind[p.state] || '')],
        ['Position', p => String(p.seq)],
        ['Lag', p => el('span', { class: p.lag ? 'warn-text' : '' }, String(p.lag))],
        ['Entities', p => String(p.entities)],
        ['Error', p => p.error ? el('span', { class: 'error' }, p.error) : ''],
        ['', p => el('button', { class: 'small rebuild', onclick: async () => {
          if (!await confirmDialog('Rebuild ' + p.name + '?', 'Every node builds it again from its source beside the current one and swaps when done; readers keep the current version meanwhile. This is how a faulted projection recovers.', 'Rebuild')) return;
          try {
            const r = await api('/$cairn/projections/' + encodeURIComponent(p.full || p.name) + '/rebuild', { method: 'POST' });
            toast('Rebuilding ' + p.name + ' (generation ' + r.data.generation + ')');
            await load();
          } catch (err) { toast(describe(err), 'error'); }
        } }, 'Rebuild')],
      ], status, { class: 'projections', empty: 'No projections are declared.' }),
      el('h2', null, 'Nodes'),
      dataTable([
        ['Node', n => n.node],
        ['Reported', n => fmtTime(n.time) + ' (' + ago(n.time) + ')'],
        ['Projections', n => (n.projections || []).map(p => badge(p.name + ': ' + (p.state || 'not yet attached') + (p.lag ? ', lag ' + p.lag : ''), stateKind[p.state] || ''))],
      ], d.nodes || [], { class: 'nodes', empty: 'No node has reported.' }));
  };
  await load();
}

// outboxPage shows each table's relayed position, head and lag, the
// blocked messages, and what this node relays.
export async function outboxPage(root) {
  const load = async () => {
    const d = (await api('/$cairn/outbox')).data;
    fill(root,
      pageHeader('Outbox', refreshButton(load)),
      el('p', { class: 'muted' }, 'Messages committed with writes, relayed to their queues and subjects in order. Lag is the records not yet fully relayed.'),
      dataTable([
        ['Stream', r => el('strong', null, r.stream)],
        ['Position', r => String(r.position)],
        ['Head', r => String(r.head)],
        ['Lag', r => { const lag = Math.max(0, r.head - r.position); return el('span', { class: lag ? 'warn-text' : '' }, String(lag)); }],
        ['Behind since', r => r.behind ? fmtTime(r.behind) + ' (' + ago(r.behind) + ')' : ''],
        ['State', r => r.blocked && r.blocked.length ? badge(plural(r.blocked.length, 'message') + ' blocked', 'bad') : badge('flowing', 'ok')],
      ], d.tables || [], { class: 'outbox', empty: 'No table has outbox messages.' }),
      el('h2', null, 'Relays on this node'),
      el('p', { class: 'muted small' }, 'Node ' + d.node + ' holds the leases of these tables.'),
      dataTable([
        ['Table', s => s.table],
        ['Position', s => String(s.position)],
        ['Read', s => String(s.read)],
        ['Head', s => String(s.head)],
        ['Pending', s => String(s.pending)],
        ['Oldest pending', s => fmtTime(s.oldestPending)],
        ['Blocked', s => (s.blocked || []).map(b => el('div', { class: 'error' },
          'partition ' + b.partition + ', record ' + b.seq + ' message ' + b.index + ' → ' + b.destination + ': ' +
          (b.reason ? b.reason + ' (' + b.error + ')' : b.error) + ', ' + b.attempts + ' attempts since ' + fmtTime(b.since) +
          (b.remedy ? '. ' + b.remedy : '')))],
      ], d.relays || [], { class: 'relays', empty: 'This node relays no table now.' }));
  };
  await load();
}

// clusterPage shows the hosts by their heartbeats, what this host's views
// hold of each table, and the moves of views under way here.
export async function clusterPage(root) {
  const load = async () => {
    const d = (await api('/$cairn/cluster')).data;
    const placed = d.viewReplicas > 0;
    fill(root,
      pageHeader('Cluster', refreshButton(load)),
      el('p', { class: 'muted' }, placed
        ? 'Each table\'s shards are held by ' + d.viewReplicas + ' of the live hosts; any host answers any request. As this host (' + d.self + ') sees it.'
        : 'Every host holds every table whole (-view-replicas 0). As this host (' + d.self + ') sees it.'),
      dataTable([
        ['Host', h => el('strong', null, h.name + (h.self ? ' (this one)' : ''))],
        ['State', h => h.live ? badge('live', 'ok') : badge('gone', 'bad')],
        ['Heartbeat behind the newest', h => h.heartbeatBehind],
        ['Key', h => h.key],
      ], d.hosts || [], { class: 'hosts', empty: 'No host has a heartbeat.' }),
      el('h2', null, 'Moves under way on this host'),
      el('p', { class: 'muted small' }, 'A view holding the shards the placement now gives this host replays beside the current one, which serves meanwhile, and takes over once caught up.'),
      dataTable([
        ['Table', m => el('strong', null, m.table)],
        ['Shards held', m => m.heldNow + ' → ' + m.heldNext + ' of ' + m.shards],
        ['Replayed', m => m.seq + ' of ' + m.target + (m.target ? ' (' + Math.floor(100 * Math.min(m.seq, m.target) / m.target) + ' %)' : '')],
        ['Started', m => fmtTime(m.started) + ' (' + ago(m.started) + ')'],
      ], d.moves || [], { class: 'moves', empty: 'No view is moving.' }),
      el('h2', null, 'What this host holds'),
      dataTable([
        ['Table', h => h.table],
        ['Shards held', h => h.shards ? h.held + ' of ' + h.shards : 'whole (a table of the layout before shards)'],
      ], d.holdings || [], { class: 'holdings', empty: 'No table.' }));
  };
  await load();
}
