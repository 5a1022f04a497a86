// The operators' pages: functions, queues and poison messages, declared
// projections and the outbox, read from the operators' API.

import { api, el, fill, toast, describe, confirmDialog, dataTable, badge, pageHeader, fmtTime, ago, b64text } from './lib.js';

const refreshButton = (fn) => el('button', { class: 'refresh', onclick: () => fn().catch(err => toast(describe(err), 'error')) }, '↻ Refresh');

function trigger(t) {
  if (!t) return '';
  if (t.queue) return ['queue ', el('a', { href: '#/queues/' + encodeURIComponent(t.queue) }, t.queue)];
  if (t.table) return 'table ' + t.table;
  if (t.every) return 'every ' + t.every;
  if (t.cron) return 'cron ' + t.cron;
  return 'direct';
}

function stat(label, value, kind) {
  return el('div', { class: 'stat ' + (kind || '') }, el('div', { class: 'stat-value' }, String(value)), el('div', { class: 'stat-label' }, label));
}

// functionsPage lists the deployed functions with their load errors, the
// node's counters, and each function's history with rollback.
export async function functionsPage(root) {
  let open = ''; // the function whose history is shown
  const load = async () => {
    const [fns, st] = await Promise.all([api('/$cairn/functions'), api('/$cairn/runner')]);
    const s = st.data;
    const history = el('div', { id: 'fn-history' });
    const showHistory = async name => {
      open = name;
      const h = (await api('/$cairn/functions/' + encodeURIComponent(name) + '/history')).data;
      const cur = h[h.length - 1];
      fill(history, el('h2', null, 'History of ' + name),
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
            } catch (err) { toast(describe(err), 'error'); }
          } }, 'Roll back to this')],
        ], h.slice().reverse(), { class: 'history' }));
    };
    fill(root,
      pageHeader('Functions', refreshButton(load)),
      el('div', { class: 'stats' },
        stat('loaded on this node', s.loaded), stat('invocations', s.invocations), stat('failures', s.failures, s.failures ? 'warn' : ''),
        stat('poisoned', s.poisoned, s.poisoned ? 'warn' : ''), stat('throttled', s.throttled), stat('refused (full queue)', s.queueFull + s.backlogRefused)),
      el('p', { class: 'muted small' }, 'Counters are this node\'s since it started (runs include retries).'),
      dataTable([
        ['Name', f => el('strong', null, f.name)],
        ['Version', f => String(f.version || '')],
        ['Trigger', f => trigger(f.trigger)],
        ['Deployed', f => f.deployed ? fmtTime(f.deployed) : ''],
        ['Module', f => f.builtin ? badge('built-in ' + f.builtin, 'info') : el('code', null, (f.digest || '').slice(0, 12))],
        ['Runs', f => String(f.invocations || 0)],
        ['Failures', f => el('span', { class: f.failures ? 'warn-text' : '' }, String(f.failures || 0))],
        ['Poisoned', f => el('span', { class: f.poisoned ? 'bad-text' : '' }, String(f.poisoned || 0))],
        ['Status', f => f.loadError ? el('span', { class: 'error' }, badge('load failed', 'bad'), ' ', f.loadError) : badge('loaded', 'ok')],
        ['', f => f.builtin ? el('span', { class: 'muted small' }, 'runs in the node') : el('button', { class: 'small', onclick: () => showHistory(f.name).catch(err => toast(describe(err), 'error')) }, 'History')],
      ], fns.data || [], { class: 'functions', empty: 'No functions are deployed.' }),
      history);
    if (open) await showHistory(open);
  };
  await load();
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
        pageHeader('Queue ' + queue, el('a', { class: 'button', href: '#/queues/' + encodeURIComponent(queue + '-poison') }, 'Poison messages'), refreshButton(load)),
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
        ['Projection', p => el('strong', null, p.name)],
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
        ['Blocked', r => r.blocked && r.blocked.length ? badge(r.blocked.length + ' blocked', 'bad') : badge('flowing', 'ok')],
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
        ['Blocked', s => (s.blocked || []).map(b => el('div', { class: 'error' }, JSON.stringify(b)))],
      ], d.relays || [], { class: 'relays', empty: 'This node relays no table now.' }));
  };
  await load();
}
