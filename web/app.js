// The dashboard's entry point: the header (connection state, the token), the
// "connection lost" banner, and the router: #/ runs (#/?compare=3,5 with runs 3 and 5
// overlaid), #/runs/{id} a run, #/submit, #/nodes, #/sweeps and #/sweeps/{id} a sweep.
import { get, getToken, onReachability, setToken } from './api.js';
import { h } from './format.js';
import { onConnectionState } from './live.js';
import { mountNodes } from './page_nodes.js';
import { mountRun } from './page_run.js';
import { mountRuns } from './page_runs.js';
import { mountSubmit } from './page_submit.js';
import { mountSweep } from './page_sweep.js';
import { mountSweeps } from './page_sweeps.js';
import { onWho, refreshWho } from './who.js';

const main = document.getElementById('main');
const banner = document.getElementById('banner');
const indicator = document.getElementById('conn');
let unmount = null;

function route() {
  if (unmount) unmount();
  main.replaceChildren();
  window.scrollTo(0, 0);
  const hash = location.hash || '#/';
  let m;
  document.title = 'ddpd';
  const section = ['#/submit', '#/nodes', '#/sweeps'].find((p) => hash.startsWith(p)) || '#/';
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.getAttribute('href') === section);
  if ((m = /^#\/runs\/(\d+)$/.exec(hash))) unmount = mountRun(main, Number(m[1]));
  else if ((m = /^#\/sweeps\/(\d+)$/.exec(hash))) unmount = mountSweep(main, Number(m[1]));
  else if (hash === '#/sweeps') unmount = mountSweeps(main);
  else if (hash === '#/submit') unmount = mountSubmit(main);
  else if (hash === '#/nodes') unmount = mountNodes(main);
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
// submit, cancel, resume and delete when the server has users or a token. Kept in
// localStorage; the button says whose it is. A server with users asks for it once.
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
// Asked once, on a server with users, when no token is kept yet.
(async () => {
  let asked = false;
  try { asked = localStorage.getItem(ASKED_KEY) === '1'; } catch { /* private mode */ }
  if (asked || getToken()) return;
  try {
    const { users } = await get('/users');
    if (!users.some((u) => !u.removed_at)) return;
    try { localStorage.setItem(ASKED_KEY, '1'); } catch { /* private mode */ }
    openTokenForm('This server has users: enter your token (ddpd user add printed it) to act as yourself.');
  } catch { /* an older server, or offline: the Token button stays */ }
})();

window.addEventListener('hashchange', route);
route();
