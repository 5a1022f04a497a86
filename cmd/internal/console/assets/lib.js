// The console's shared helpers: the operators' API with the token, DOM
// building (text only: nothing shown is ever parsed as HTML), dialogs and
// notices.

const TOKEN_KEY = 'cairn.operatorToken';

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
}

// ApiError is a refused or failed call: its HTTP status, the server's
// code and message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || ('HTTP ' + status));
    this.status = status;
    this.code = code || '';
  }
}

// Listeners told when the token is refused (the shell asks for it again).
const unauthorized = [];
export function onUnauthorized(fn) { unauthorized.push(fn); }

// api calls the node with the operator token. opts: method, body (an
// object is sent as JSON), headers, raw (return the Response). It returns
// {status, headers, data} or throws ApiError.
export async function api(path, opts = {}) {
  const headers = Object.assign({ 'Authorization': 'Bearer ' + token(), 'Accept': 'application/json' }, opts.headers || {});
  let body = opts.body;
  if (body !== undefined && typeof body !== 'string') {
    body = JSON.stringify(body);
    headers['Content-Type'] = headers['Content-Type'] || 'application/json';
  }
  const resp = await fetch(path, { method: opts.method || 'GET', headers, body, cache: 'no-store' });
  const data = await readData(resp);
  if (!resp.ok) throw refused(resp, data, opts);
  return { status: resp.status, headers: resp.headers, data };
}

// readData reads a reply's body: JSON when it parses, else text (null
// when empty).
async function readData(resp) {
  const text = await resp.text();
  if (!text) return null;
  try { return JSON.parse(text); } catch { return text; }
}

// refused turns a refusal into an ApiError, telling the listeners when
// the token was refused.
function refused(resp, data, opts = {}) {
  let code = '', msg = '';
  if (data && typeof data === 'object') {
    if (data['odata.error']) {
      code = data['odata.error'].code;
      msg = data['odata.error'].message && data['odata.error'].message.value;
    } else {
      code = data.code; msg = data.error;
    }
  } else if (typeof data === 'string') {
    msg = data;
  }
  const err = new ApiError(resp.status, code, msg);
  if (resp.status === 401 && !opts.noAuthRetry) unauthorized.forEach(fn => fn(err));
  return err;
}

// fetchBytes GETs path with the token and returns its body as a Blob
// (a large value's download), or throws ApiError. The whole body is held
// by the browser until it is saved.
export async function fetchBytes(path) {
  const resp = await fetch(path, { headers: { 'Authorization': 'Bearer ' + token() }, cache: 'no-store' });
  if (!resp.ok) throw refused(resp, await readData(resp));
  return resp.blob();
}

// el builds an element: el('div', {class: 'x', onclick: fn}, child, 'text').
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k === 'value') e.value = v;
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, v);
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(e, c);
    else e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// clear empties an element and fills it with children.
export function fill(e, ...children) {
  e.replaceChildren();
  append(e, children);
  return e;
}

let toastTimer;
// toast shows a short notice; kind 'error' keeps it longer.
export function toast(msg, kind = 'ok') {
  const t = document.getElementById('toast');
  t.textContent = msg;
  t.className = 'show ' + kind;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.className = ''; }, kind === 'error' ? 8000 : 3000);
}

// describe turns an error into one line for the user.
export function describe(err) {
  if (err instanceof ApiError) {
    // Azure's messages end with the request's id and time: noise here.
    const msg = err.message.replace(/\s*RequestId:\S+\s*Time:\S+\s*$/, '');
    return (err.code ? err.code + ': ' : '') + msg;
  }
  return String(err && err.message || err);
}

// confirmDialog asks before something that cannot be undone; resolves
// true when confirmed.
export function confirmDialog(title, text, okLabel = 'Delete') {
  const d = document.getElementById('confirm-dialog');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-ok').textContent = okLabel;
  d.returnValue = '';
  return new Promise(resolve => {
    // Answered when the dialog closes, as its open attribute goes: the
    // 'close' event comes in a later frame, and Chromium fires one event
    // for a close and a quick reopening (the previous question's close
    // would answer this one, and this one's none).
    const watch = new MutationObserver(() => {
      if (d.open) return;
      watch.disconnect();
      resolve(d.returnValue === 'ok');
    });
    d.showModal();
    watch.observe(d, { attributes: true, attributeFilter: ['open'] });
  });
}

// fmtTime shows an ISO time as local "YYYY-MM-DD hh:mm:ss" ('' for none).
export function fmtTime(s) {
  if (!s || s.startsWith('0001-')) return '';
  const d = new Date(s);
  if (isNaN(d)) return s;
  const p = n => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// ago shows how long before now a time was ("12 s ago").
export function ago(s) {
  if (!s || s.startsWith('0001-')) return '';
  const secs = Math.max(0, (Date.now() - new Date(s).getTime()) / 1000);
  if (secs < 120) return Math.round(secs) + ' s ago';
  if (secs < 7200) return Math.round(secs / 60) + ' min ago';
  if (secs < 172800) return Math.round(secs / 3600) + ' h ago';
  return Math.round(secs / 86400) + ' days ago';
}

// b64text shows a base64 body as text when it is UTF-8, else as hex.
export function b64text(b64) {
  if (!b64) return '';
  const bin = atob(b64);
  const bytes = Uint8Array.from(bin, c => c.charCodeAt(0));
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return Array.from(bytes.slice(0, 256), b => b.toString(16).padStart(2, '0')).join(' ') + (bytes.length > 256 ? ' …' : '');
  }
}

// download offers text (or a Blob) as a file.
export function download(name, mime, text) {
  const url = URL.createObjectURL(text instanceof Blob ? text : new Blob([text], { type: mime }));
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// table builds a data table: cols are [title, fn(row) → cell content].
export function dataTable(cols, rows, opts = {}) {
  return el('table', { class: 'grid' + (opts.class ? ' ' + opts.class : '') },
    el('thead', null, el('tr', null, cols.map(c => el('th', null, c[0])))),
    el('tbody', null, rows.length === 0
      ? el('tr', null, el('td', { colspan: cols.length, class: 'empty' }, opts.empty || 'Nothing here.'))
      : rows.map(r => el('tr', opts.rowAttrs ? opts.rowAttrs(r) : null, cols.map(c => el('td', null, c[1](r)))))));
}

// badge is a small coloured label.
export function badge(text, kind) { return el('span', { class: 'badge ' + (kind || '') }, text); }

// pageHeader is a page's title row with its buttons.
export function pageHeader(title, ...buttons) {
  return el('div', { class: 'page-head' }, el('h1', null, title), el('span', { class: 'spacer' }), buttons);
}
