// A function's HTTP routes, keys, settings and secrets, on its details
// in the functions page, through the operators' API
// (/$cairn/functions/<name>/keys, …/settings, …/secrets). No answer of
// the API carries a key after its creation or a secret's value ever; the
// page shows a new key once, and a secret typed is sent and cleared.

import { api, el, fill, toast, describe, confirmDialog, dataTable, badge, fmtTime } from './lib.js';

const fnPath = name => '/$cairn/functions/' + encodeURIComponent(name);

// routeURL is where this host serves a function's route: the path as
// declared ({id}, {*rest} left for the caller to fill).
export function routeURL(name, path) {
  return location.origin + '/fn/' + encodeURIComponent(name) + path;
}

// size shows a number of bytes as MiB, KiB or bytes.
function size(n) {
  if (n >= 1048576 && n % 1048576 === 0) return n / 1048576 + ' MiB';
  if (n >= 1024 && n % 1024 === 0) return n / 1024 + ' KiB';
  return n + ' bytes';
}

// routesSection shows a function's HTTP routes: method, path, who may
// call, the origins its cors lets in, and the URL on this host.
export function routesSection(f) {
  const h = f.trigger && f.trigger.http;
  if (!h) return null;
  return [
    el('h2', null, 'HTTP routes of ' + f.name),
    el('p', { class: 'muted small' }, 'Served on every host under /fn/' + f.name + '/; a route whose auth is key takes a function key (below) in the header x-functions-key, one whose auth is account a request signed for the account (SharedKey or an account SAS). ' +
      'Bodies up to ' + size(h.maxBodyBytes || 1048576) + ', ' + (h.ratePerKey || 100) + ' calls a second per caller on each host.'),
    dataTable([
      ['Method', r => el('code', null, r.method)],
      ['Path', r => el('code', null, r.path)],
      ['Auth', r => authBadge(r, h)],
      ['CORS origins', r => r.cors && r.cors.origins ? r.cors.origins.join(' ') : el('span', { class: 'muted' }, 'none')],
      ['URL on this host', r => el('code', { class: 'route-url' }, routeURL(f.name, r.path))],
    ], h.routes || [], { class: 'fn-routes', empty: 'No routes.' }),
  ];
}

// authBadge says who may call a route: anyone, a function key, or a
// request signed for the trigger's storage account.
function authBadge(r, h) {
  if (r.auth === 'anonymous') return badge('anonymous', 'warn');
  if (r.auth === 'account') return badge('account ' + (h.account || ''), 'info');
  return badge('key', 'info');
}

// copyButton copies the text of source to the clipboard; where the
// browser refuses, it selects the text for the operator to copy.
function copyButton(source, id) {
  return el('button', { type: 'button', class: 'small copy', id, onclick: async () => {
    try {
      await navigator.clipboard.writeText(source.textContent);
      toast('Copied');
    } catch {
      const range = document.createRange();
      range.selectNodeContents(source);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      toast('The browser refused the clipboard: the key is selected, copy it with the keyboard', 'error');
    }
  } }, 'Copy');
}

// keysSection lists a function's keys, creates one (shown once) and
// revokes one (confirmed). It returns the section and its first load.
export function keysSection(name) {
  const list = el('div', { id: 'fn-keys' });
  const shown = el('div', { id: 'new-key-box' });
  const keyName = el('input', { id: 'key-name', placeholder: 'name (default)', maxlength: 64, autocomplete: 'off' });
  const load = async () => {
    const ks = (await api(fnPath(name) + '/keys')).data || [];
    fill(list, dataTable([
      ['Name', k => el('strong', null, k.name)],
      ['Id', k => el('code', null, k.id)],
      ['Created', k => fmtTime(k.created)],
      ['', k => el('button', { class: 'small danger revoke-key', dataset: { id: k.id }, onclick: () => revoke(k) }, 'Revoke…')],
    ], ks, { class: 'fn-keys', empty: name + ' has no keys: its routes whose auth is key refuse every call.' }));
  };
  const revoke = async k => {
    if (!await confirmDialog('Revoke key ' + k.name + ' (' + k.id + ') of ' + name + '?',
      'Calls with it are refused (401) on every host as soon as its watch of the keys delivers the removal. It cannot be undone: callers need another key.', 'Revoke')) return;
    try {
      await api(fnPath(name) + '/keys/' + encodeURIComponent(k.id), { method: 'DELETE' });
      toast('Key ' + k.name + ' (' + k.id + ') of ' + name + ' revoked');
      await load();
    } catch (err) {
      // Revoked elsewhere meanwhile (ResourceNotFound): the list is stale.
      toast(describe(err), 'error');
      await load().catch(() => {});
    }
  };
  const create = async ev => {
    ev.preventDefault();
    const n = keyName.value.trim();
    try {
      const r = (await api(fnPath(name) + '/keys' + (n ? '?name=' + encodeURIComponent(n) : ''), { method: 'POST' })).data;
      keyName.value = '';
      const text = el('code', { id: 'new-key-text' }, r.key);
      fill(shown, el('div', { class: 'new-key' },
        el('div', { class: 'new-key-head' }, el('strong', null, 'New key ' + r.name + ' (' + r.id + ')'), el('span', { class: 'spacer' }),
          copyButton(text, 'copy-key'), el('button', { type: 'button', class: 'small', id: 'dismiss-key', onclick: () => fill(shown) }, 'Done')),
        text,
        el('p', { class: 'warn-text small' }, 'Copy it now: it will not be shown again. The node keeps only its SHA-256; a lost key is revoked and replaced.')));
      await load();
    } catch (err) { toast(describe(err), 'error'); }
  };
  const section = [
    el('h2', null, 'Keys of ' + name),
    el('p', { class: 'muted small' }, 'Several at once, so that one can be replaced before the other is revoked; at most 16. The secret is shown once, when the key is made.'),
    el('form', { id: 'key-form', class: 'inline-form', onsubmit: create }, keyName, el('button', { id: 'create-key', type: 'submit', class: 'primary' }, 'Create key')),
    shown, list,
  ];
  return { section, load };
}

// fileText is a file's content as text, byte for byte (a byte-order mark
// kept); a file that is not UTF-8 is refused here, as the node would.
async function fileText(f) {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(await f.arrayBuffer());
  } catch {
    throw new Error('the file ' + f.name + ' is not UTF-8 text: a value is text');
  }
}

// settingsSection lists a function's settings (with their values) and
// secrets (names only), sets and removes them. A secret's value is typed
// in a password field, sent once and cleared; the page never has it back.
// A value set is cleared from the form with its name.
export function settingsSection(name) {
  const list = el('div', { id: 'fn-settings' });
  const load = async () => {
    const ss = (await api(fnPath(name) + '/settings')).data || [];
    fill(list, dataTable([
      ['Name', s => el('code', null, s.name)],
      ['Kind', s => s.secret ? badge('secret', 'warn') : badge('setting', 'info')],
      ['Value', s => s.secret ? el('span', { class: 'muted' }, 'hidden: set, never shown') : el('pre', { class: 'body setting-value' }, s.value || '')],
      ['Set', s => fmtTime(s.set)],
      ['', s => el('button', { class: 'small danger remove-setting', dataset: { name: s.name }, onclick: () => remove(s) }, 'Remove…')],
    ], ss, { class: 'fn-settings', rowAttrs: s => ({ dataset: { name: s.name, kind: s.secret ? 'secret' : 'setting' } }), empty: name + ' has no settings or secrets.' }));
  };
  const remove = async s => {
    const kind = s.secret ? 'secret' : 'setting';
    if (!await confirmDialog('Remove ' + kind + ' ' + s.name + ' of ' + name + '?',
      'The next invocations of ' + name + ' read it as not set: on this host at once, on the others once their watch has the change.' + (s.secret ? ' Its value is gone for good.' : ''), 'Remove')) return;
    try {
      await api(fnPath(name) + '/' + kind + 's/' + encodeURIComponent(s.name), { method: 'DELETE' });
      toast(kind[0].toUpperCase() + kind.slice(1) + ' ' + s.name + ' of ' + name + ' removed');
      await load();
    } catch (err) { toast(describe(err), 'error'); }
  };
  // form sets a setting or a secret: a name and the fields of its value,
  // read by value() and emptied by clear().
  const form = (kind, fields, value, clear) => {
    const n = el('input', { id: kind + '-name', placeholder: 'NAME', maxlength: 64, autocomplete: 'off', required: true });
    return el('form', { id: kind + '-form', class: 'inline-form', onsubmit: async ev => {
      ev.preventDefault();
      const key = n.value.trim();
      try {
        await api(fnPath(name) + '/' + kind + 's/' + encodeURIComponent(key), { method: 'POST', body: await value(), headers: { 'Content-Type': 'text/plain; charset=utf-8' } });
        n.value = '';
        clear();
        toast((kind === 'secret' ? 'Secret ' : 'Setting ') + key + ' of ' + name + ' set');
        await load();
      } catch (err) { toast(describe(err), 'error'); }
    } }, el('strong', null, kind === 'secret' ? 'Set a secret:' : 'Set a setting:'), n, fields,
    el('button', { id: 'set-' + kind, type: 'submit' }, kind === 'secret' ? 'Set secret' : 'Set setting'));
  };
  // A setting's value may have lines (a textarea keeps them). A secret's
  // is typed in a password field, which holds one line, or read from a
  // file (a PEM key), as the CLI's -file does; the file wins when chosen.
  const settingValue = el('textarea', { id: 'setting-value', rows: 1, placeholder: 'value', autocomplete: 'off' });
  const secretValue = el('input', { id: 'secret-value', type: 'password', placeholder: 'value (not shown)', autocomplete: 'new-password' });
  const secretFile = el('input', { id: 'secret-file', type: 'file', title: 'or the value from a file (its text, as it is)' });
  const section = [
    el('h2', null, 'Settings and secrets of ' + name),
    el('p', { class: 'muted small' }, 'The function reads both by name (Setting); a change is seen, without a redeploy, by the next invocation on this host, and on the others once their watch has it. A secret is sealed at rest and never shown, here or anywhere: type it (one line) or choose a file holding it.'),
    form('setting', settingValue, async () => settingValue.value, () => { settingValue.value = ''; }),
    form('secret', [secretValue, el('span', { class: 'muted small' }, 'or'), secretFile],
      async () => secretFile.files.length ? fileText(secretFile.files[0]) : secretValue.value,
      () => { secretValue.value = ''; secretFile.value = ''; }),
    list,
  ];
  return { section, load };
}
