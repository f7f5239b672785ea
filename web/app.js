// The dashboard's entry point: the header (connection state, the token), the
// "connection lost" banner, and the router: #/ runs (#/?compare=3,5 with runs 3 and 5
// overlaid), #/runs/{id} a run, #/submit, #/nodes.
import { getToken, onReachability, setToken } from './api.js';
import { h } from './format.js';
import { onConnectionState } from './live.js';
import { mountNodes } from './page_nodes.js';
import { mountRun } from './page_run.js';
import { mountRuns } from './page_runs.js';
import { mountSubmit } from './page_submit.js';

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
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.getAttribute('href') === (hash.startsWith('#/submit') ? '#/submit' : hash.startsWith('#/nodes') ? '#/nodes' : '#/'));
  if ((m = /^#\/runs\/(\d+)$/.exec(hash))) unmount = mountRun(main, Number(m[1]));
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

// The token: only needed when ddpd was started with --token, to submit and cancel.
const tokenBtn = document.getElementById('token-button');
const tokenForm = document.getElementById('token-form');
const tokenInput = document.getElementById('token-input');
function showToken() { tokenBtn.textContent = getToken() ? 'Token ✓' : 'Token'; }
tokenBtn.addEventListener('click', () => {
  tokenForm.hidden = !tokenForm.hidden;
  tokenInput.value = getToken();
  if (!tokenForm.hidden) tokenInput.focus();
});
tokenForm.addEventListener('submit', (e) => {
  e.preventDefault();
  setToken(tokenInput.value.trim());
  tokenForm.hidden = true;
  showToken();
});
showToken();

window.addEventListener('hashchange', route);
route();
