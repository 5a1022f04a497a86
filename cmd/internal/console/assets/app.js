// The console's shell: sign-in with the operator token, the navigation and
// the pages (routes in the URL's fragment: #/tables/<name>, #/queues, …).

import { api, token, setToken, onUnauthorized, fill, el, describe } from './lib.js';
import { tablesPage } from './tables.js';
import { functionsPage, queuesPage, projectionsPage, outboxPage, clusterPage } from './ops.js';

const pages = {
  tables: tablesPage,
  functions: functionsPage,
  queues: queuesPage,
  projections: projectionsPage,
  outbox: outboxPage,
  cluster: clusterPage,
};

const main = () => document.getElementById('main');

// closePageDialogs closes the dialogs a page opened (the entity editor; a
// confirmation, which then answers no): they belong to the page being
// left, and must not stay open over the next one or act on it.
function closePageDialogs() {
  for (const d of document.querySelectorAll('dialog[open]')) {
    if (d.id !== 'login-dialog') d.close();
  }
}

// route renders the page the fragment names.
async function route() {
  closePageDialogs();
  if (!token()) { askToken(); return; }
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const name = pages[parts[0]] ? parts[0] : 'tables';
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === name);
  document.getElementById('signout').hidden = false;
  const m = main();
  m.dataset.page = name;
  fill(m, el('p', { class: 'loading' }, 'Loading…'));
  try {
    await pages[name](m, parts.slice(1));
  } catch (err) {
    if (err.status === 401) return; // askToken is showing
    fill(m, el('p', { class: 'error' }, describe(err)));
  }
}

// askToken shows the sign-in dialog; msg says why (a refused token).
function askToken(msg) {
  const d = document.getElementById('login-dialog');
  const e = document.getElementById('login-error');
  e.hidden = !msg;
  e.textContent = msg || '';
  document.getElementById('signout').hidden = true;
  fill(main());
  if (!d.open) d.showModal();
  document.getElementById('login-token').focus();
}

async function signIn(ev) {
  ev.preventDefault();
  const input = document.getElementById('login-token');
  const t = input.value.trim();
  if (!t) return;
  setToken(t);
  try {
    await api('/$cairn/runner', { noAuthRetry: true });
  } catch (err) {
    setToken('');
    input.value = '';
    askToken(err.status === 401 ? 'The node refused this token: check it and try again.' : 'Could not reach the node: ' + describe(err));
    return;
  }
  input.value = '';
  document.getElementById('login-dialog').close();
  route();
}

function start() {
  document.getElementById('login-form').addEventListener('submit', signIn);
  // The sign-in dialog cannot be dismissed without a token.
  document.getElementById('login-dialog').addEventListener('cancel', ev => ev.preventDefault());
  document.getElementById('signout').addEventListener('click', () => { setToken(''); askToken(); });
  onUnauthorized(() => { setToken(''); askToken('The node refused the token (was it changed?): sign in again.'); });
  window.addEventListener('hashchange', route);
  route();
}

start();
