// The dashboard's entry point: the header (connection state, the token, signing
// out), the "connection lost" banner, the sign-in page of a server whose reads need
// a token, and the router: #/ runs (#/?compare=3,5 with runs 3 and 5 overlaid),
// #/runs/{id} a run, #/submit, #/nodes, #/sweeps and #/sweeps/{id} a sweep, and
// #/usage?from=&to= where the device time went.
import { get, getToken, onReachability, onUnauthorized, probe, setToken } from './api.js';
import { h } from './format.js';
import { onConnectionState } from './live.js';
import { mountNodes } from './page_nodes.js';
import { mountRun } from './page_run.js';
import { mountRuns } from './page_runs.js';
import { mountSubmit } from './page_submit.js';
import { mountSweep } from './page_sweep.js';
import { mountSweeps } from './page_sweeps.js';
import { mountUsage } from './page_usage.js';
import { onWho, refreshWho } from './who.js';

const main = document.getElementById('main');
const banner = document.getElementById('banner');
const indicator = document.getElementById('conn');
let unmount = null;

// True while this server reads nothing to us: the sign-in page stands in for every page.
let signedOut = false;

function route() {
  if (unmount) unmount();
  main.replaceChildren();
  window.scrollTo(0, 0);
  unmount = null;
  if (signedOut) { showSignIn(); return; }
  const hash = location.hash || '#/';
  let m;
  document.title = 'ddpd';
  const section = ['#/submit', '#/nodes', '#/sweeps', '#/usage'].find((p) => hash.startsWith(p)) || '#/';
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.getAttribute('href') === section);
  if ((m = /^#\/runs\/(\d+)$/.exec(hash))) unmount = mountRun(main, Number(m[1]));
  else if ((m = /^#\/sweeps\/(\d+)$/.exec(hash))) unmount = mountSweep(main, Number(m[1]));
  else if (hash === '#/sweeps') unmount = mountSweeps(main);
  else if (hash === '#/submit') unmount = mountSubmit(main);
  else if (hash === '#/nodes') unmount = mountNodes(main);
  else if ((m = /^#\/usage(?:\?(.*))?$/.exec(hash))) unmount = mountUsage(main, m[1]);
  else if (hash === '#/' || hash === '#' || hash.startsWith('#/?')) unmount = mountRuns(main);
  else {
    main.append(h('div', { class: 'empty' }, h('h2', {}, 'Nothing here'), h('a', { class: 'button', href: '#/' }, 'All runs')));
    unmount = null;
  }
}

// The live stream and plain requests both tell whether ddpd is there.
let streamState = 'connecting', reachable = true;
function showConnection() {
  const lost = streamState === 'lost' || !reachable;
  banner.hidden = !lost;
  indicator.className = `conn conn-${lost ? 'lost' : streamState}`;
  indicator.hidden = streamState === 'idle' && !lost;
  indicator.textContent = lost ? 'offline' : streamState === 'live' ? 'live' : 'connecting';
  indicator.title = lost ? 'The connection to ddpd is lost: retrying' : streamState === 'live' ? 'Live updates' : 'Connecting';
}
onConnectionState((s) => { streamState = s; if (s === 'live') reachable = true; showConnection(); });
onReachability((ok) => { reachable = ok; showConnection(); });

// The token: a user's (ddpd user add prints it) or the server's (--token), needed to
// submit, cancel, resume and delete when the server has users or a token, and to read
// anything once it has users (the sign-in page below). Kept in localStorage until
// "Sign out"; the button says whose it is.
const tokenBtn = document.getElementById('token-button');
const tokenForm = document.getElementById('token-form');
const tokenInput = document.getElementById('token-input');
const tokenHint = document.getElementById('token-hint');
const ASKED_KEY = 'ddpd.token-asked';
function showToken(me) {
  const who = me && me.kind === 'user' ? ` ${me.name}` : me && me.kind === 'token' ? ' (admin)' : '';
  tokenBtn.textContent = getToken() ? `Token ✓${who}` : 'Token';
  tokenBtn.title = me && me.kind === 'user' ? `Acting as ${me.name}${me.admin ? ', an admin' : ''}` : '';
}
function openTokenForm(hint) {
  tokenHint.textContent = hint || '';
  tokenHint.hidden = !hint;
  tokenForm.hidden = false;
  tokenInput.value = getToken();
  tokenInput.focus();
}
tokenBtn.addEventListener('click', () => {
  if (tokenForm.hidden) openTokenForm('');
  else tokenForm.hidden = true;
});
tokenForm.addEventListener('submit', (e) => {
  e.preventDefault();
  setToken(tokenInput.value.trim());
  tokenForm.hidden = true;
  refreshWho();
});
onWho(showToken);
refreshWho();
// Asked once, on a server with users whose reads are open (--open-reads), when no
// token is kept yet: a server that reads nothing without one signs in instead.
const askOnce = async () => {
  let asked = false;
  try { asked = localStorage.getItem(ASKED_KEY) === '1'; } catch { /* private mode */ }
  if (asked || getToken()) return;
  try {
    const { users } = await get('/users');
    if (!users.some((u) => !u.removed_at)) return;
    try { localStorage.setItem(ASKED_KEY, '1'); } catch { /* private mode */ }
    openTokenForm('This server has users: enter your token (ddpd user add printed it) to act as yourself.');
  } catch { /* an older server, or offline: the Token button stays */ }
};

// ---- signing in: a server with users reads nothing without a token ----
let signInHint = '';
function showSignIn() {
  document.title = 'ddpd: sign in';
  const input = h('input', { id: 'signin-token', type: 'password', autocomplete: 'off', placeholder: 'your token' });
  const error = h('p', { id: 'signin-error', class: 'signin-error', role: 'alert', hidden: true });
  const form = h('form', { id: 'signin-form', class: 'signin card' },
    h('h1', {}, 'Sign in'),
    h('p', { id: 'signin-hint' }, signInHint ||
      'This ddpd has users: it shows its runs to them only. Enter your token: `ddpd user add` printed it once; ' +
      'an admin makes you a new one with `ddpd user token NAME`.'),
    h('label', {}, 'Token ', input), h('button', { class: 'button primary', type: 'submit' }, 'Sign in'), error);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    const p = await probe();
    if (p === 'ok') { signedOut = false; signInHint = ''; refreshWho(); route(); return; }
    if (p === 'unauthorized') setToken('');
    error.textContent = p === 'offline' ? 'ddpd cannot be reached: is it running?'
      : 'That is not a token this server knows (a replaced one stops working): check it, or ask an admin for a new one.';
    error.hidden = false;
  });
  main.append(form);
  input.focus();
}
function signOutNow(hint) {
  setToken('');
  signedOut = true;
  signInHint = hint || '';
  refreshWho();
  route();
}
// A read refused mid-session (the token replaced, its user removed): sign in again.
onUnauthorized(() => {
  if (!signedOut) signOutNow('Your token is no longer accepted (it was replaced, or its user removed): sign in again.');
});
const signOutBtn = document.getElementById('sign-out');
signOutBtn.addEventListener('click', async () => {
  setToken('');
  if ((await probe()) === 'unauthorized') signOutNow('Signed out. Enter a token to sign in again.');
  else { refreshWho(); route(); }
});
onWho(() => { signOutBtn.hidden = !getToken(); });

window.addEventListener('hashchange', route);
// The first page waits for the answer to whether this page may read at all.
(async () => {
  signedOut = (await probe()) === 'unauthorized';
  if (signedOut && getToken()) {
    setToken('');
    signInHint = 'The token kept here is not one this server knows (it was replaced, or its user removed): sign in again.';
  }
  route();
  if (!signedOut) askOnce();
})();
