// The nodes (#/nodes): this host and every `ddpd agent` registered with it (GET
// /nodes), with their address, whether they are up or lost, their CPU slots and GPUs
// (free of all), its mark (fine, watched, suspect or excluded) and when each was last
// heard from; polled every 2 s while shown, as nodes come and go without an event on
// the live stream (each poll sends the last answer's ETag: 304 until it changes, and
// the page is drawn again only then). Below them each marked node's card (node_marks.js):
// its devices' states, the failures that count, the evidence as the API gives it, and
// for an admin a Clear button. Then the queue (GET /queue): each queued run in the
// order it will start, why it waits (its pending reason and the runs it waits behind
// or for) and when it is expected to start.
import { get, post, revalidate } from './api.js';
import { ago, h } from './format.js';
import { markBadge, markCard, markOf } from './node_marks.js';
import { onWho } from './who.js';

const POLL_MS = 2000;

function cell(label, ...content) { return h('td', { 'data-label': label }, ...content); }

// "in 40 s (12:03:10)", or why there is no estimate.
function startText(p) {
  if (!p) return h('span', { class: 'muted' }, 'starting now');
  if (!p.estimated_start) return h('span', { class: 'muted', title: p.estimate_basis }, 'no estimate');
  const at = Date.parse(p.estimated_start), left = Math.round((at - Date.now()) / 1000);
  return h('span', { title: p.estimate_basis }, `${left > 0 ? `in ${left} s` : 'now'} (${new Date(at).toLocaleTimeString()})`);
}

function queueRow(q) {
  const p = q.pending;
  return h('tr', { class: 'queued-run', 'data-run': String(q.id) },
    cell('#', String(q.position)),
    cell('Run', h('a', { href: `#/runs/${q.id}` }, `#${q.id}`)),
    cell('Owner', q.owner || '—'),
    cell('Reason', p ? h('code', { class: 'pending-reason' }, p.reason) : '—'),
    cell('Waits for', h('span', { class: 'small' }, (p && p.detail) || q.waiting_for || '—',
      p && p.blocked_by.length ? h('span', { class: 'muted' }, ` (runs ${p.blocked_by.join(', ')})`) : '')),
    cell('Expected start', startText(p)));
}

function row(n) {
  const state = h('span', { class: `badge badge-node-${n.state}` }, n.state);
  const m = markOf(n);
  const what = m.state === 'suspect' && !m.mark.suspect ? (n.suspect_devices || []).join(', ') : '';
  return h('tr', { class: `node node-${n.state}`, 'data-node': n.name },
    cell('Node', h('span', {}, h('strong', {}, n.name), n.local ? h('span', { class: 'muted small' }, ' (this host)') : '')),
    cell('Address', n.address ? h('code', {}, n.address) : h('span', { class: 'muted', title: 'ddpd serve --advertise ADDR lets this host take part in runs across nodes' }, 'none: not in runs across nodes')),
    cell('State', state),
    cell('Mark', markBadge(m.state, what)),
    cell('CPU slots', `${n.free_slots} free of ${n.slots}`),
    cell('GPUs', n.gpus.length ? `${n.free_gpus} free of ${n.gpus.length}` : '—'),
    cell('Last heard', n.local ? 'this host' : ago(n.last_heartbeat)));
}

export function mountNodes(root) {
  const status = h('p', { class: 'muted', id: 'nodes-status' }, 'Loading…');
  const tbody = h('tbody');
  const table = h('table', { class: 'runs nodes', id: 'nodes-table', hidden: true },
    h('thead', {}, h('tr', {}, ['Node', 'Address', 'State', 'Mark', 'CPU slots', 'GPUs', 'Last heard'].map((t) => h('th', {}, t)))),
    tbody);
  const hint = h('p', { class: 'muted small' }, 'Add a machine with ', h('code', {}, 'ddpd agent --coordinator URL --token-file FILE'),
    '; a run with distributed.nodes, or more ranks than this host has, is placed across them.');
  const queueBody = h('tbody');
  const queueStatus = h('p', { class: 'muted', id: 'queue-status' }, 'Loading…');
  const queueTable = h('table', { class: 'runs queue', id: 'queue-table', hidden: true },
    h('thead', {}, h('tr', {}, ['#', 'Run', 'Owner', 'Reason', 'Waits for', 'Expected start'].map((t) => h('th', {}, t)))),
    queueBody);
  const marksBody = h('div', { id: 'node-marks-list' });
  const marksStatus = h('p', { class: 'muted small', id: 'node-marks-status' });
  const marksCard = h('section', { class: 'card', id: 'node-marks', hidden: true },
    h('h2', {}, 'Marked nodes'), marksStatus, marksBody);
  root.append(h('div', { class: 'page-head' }, h('h1', {}, 'Nodes')), status, table, hint, marksCard,
    h('section', { class: 'card', id: 'queue-card' }, h('h2', {}, 'Queue'), queueStatus, queueTable));
  let timer = null, stopped = false, nodes = null, admin = false, inflight = null;

  // The marked nodes' cards, from the last answer, for this caller (admin or not).
  function drawMarks() {
    const marked = (nodes || []).filter((n) => markOf(n).mark);
    marksBody.replaceChildren(...marked.map((n) => markCard(n, admin, clearNode)));
    marksCard.hidden = !marked.length;
    marksStatus.textContent = admin
      ? 'An admin clears a mark: runs may be placed there again.'
      : 'Only an admin clears a mark (ddpd node clear NAME, or POST /nodes/NAME/clear).';
  }

  async function clearNode(name) {
    try {
      await post(`/nodes/${encodeURIComponent(name)}/clear`);
    } catch (e) {
      return e.message;
    }
    if (inflight) await inflight; // a read begun before the clear: read again after it
    await refresh();
    return null;
  }

  const stopWho = onWho((me) => {
    const was = admin;
    admin = !!(me && me.admin);
    if (nodes && was !== admin) drawMarks();
  });

  // One read of the nodes and the queue at a time; the next in POLL_MS.
  function refresh() {
    if (!inflight) inflight = read().finally(() => { inflight = null; });
    return inflight;
  }

  async function read() {
    clearTimeout(timer);
    try {
      const { value, changed } = await revalidate('/nodes');
      if (changed || !nodes) {
        nodes = value.nodes;
        tbody.replaceChildren(...nodes.map(row));
        drawMarks();
      }
      table.hidden = false;
      const agents = nodes.filter((n) => !n.local);
      const lost = agents.filter((n) => n.state === 'lost').length;
      status.textContent = agents.length
        ? `${agents.length} agent node${agents.length === 1 ? '' : 's'}${lost ? `, ${lost} lost` : ''}, besides this host.`
        : 'This host only: no agent has registered.';
    } catch (e) {
      status.textContent = `Cannot list the nodes: ${e.message}`;
    }
    try {
      const { runs } = await get('/queue');
      queueBody.replaceChildren(...runs.map(queueRow));
      queueTable.hidden = !runs.length;
      queueStatus.textContent = runs.length ? `${runs.length} run${runs.length === 1 ? '' : 's'} queued.` : 'No run is queued.';
    } catch (e) {
      queueStatus.textContent = `Cannot read the queue: ${e.message}`;
    }
    if (!stopped) timer = setTimeout(refresh, POLL_MS);
  }
  refresh();
  return () => { stopped = true; clearTimeout(timer); stopWho(); };
}
