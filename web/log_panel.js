// A run's log panel, followed without gaps or repeats: the first read takes the last
// lines (?tail=) and the byte it ended at (X-Next-Offset); every later read asks for
// what came after that byte (?offset=) and moves on to the next X-Next-Offset. A
// command run's panel has a rank selector: "All ranks" is the run's log (the ranks'
// lines prefixed "[rank N]", the launcher's), "Rank N" that rank's own output.
import { getText } from './api.js';
import { h } from './format.js';

const TAIL_LINES = 200; // what the first read shows
const KEEP_LINES = 5000; // what the panel holds; older lines are dropped from the top
const MAX_READS = 16; // reads per poll: the server answers at most 1 MiB each

export function logPanel(id) {
  const pre = h('pre', { class: 'log', id: 'run-log', dataset: { source: 'all' } }, 'Loading…');
  const rankSelect = h('select', { id: 'log-rank', 'aria-label': 'whose log', onchange: () => show(rankSelect.value) });
  const controls = h('div', { class: 'controls', id: 'log-controls', hidden: true }, h('label', {}, 'log of ', rankSelect));
  let source = 'all', next = null, text = '', dropped = 0, generation = 0;
  let reading = null, again = false, disposed = false;

  function query(extra) {
    return `/runs/${id}/logs?${source === 'all' ? '' : `rank=${source}&`}${extra}`;
  }

  // The selector, once the run is known to be a command run of `worldSize` ranks.
  function setRanks(worldSize) {
    if (rankSelect.options.length === worldSize + 1) return;
    rankSelect.replaceChildren(h('option', { value: 'all' }, 'All ranks'),
      ...Array.from({ length: worldSize }, (_, r) => h('option', { value: String(r) }, `Rank ${r}`)));
    rankSelect.value = source;
    controls.hidden = false;
  }

  function show(which) {
    if (which === source) return;
    source = which;
    generation++;
    next = null;
    text = '';
    dropped = 0;
    pre.dataset.source = which;
    pre.textContent = 'Loading…';
    poll();
  }

  function render() {
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
    let lines = text.split('\n');
    if (lines.length > KEEP_LINES + 1) { // (+1: the empty string after the last newline)
      const cut = lines.length - 1 - KEEP_LINES;
      dropped += cut;
      lines = lines.slice(cut);
      text = lines.join('\n');
    }
    const empty = source === 'all' ? '(the log is empty)' : `(rank ${source} has written nothing yet)`;
    pre.textContent = dropped ? `(${dropped} earlier lines are not shown)\n${text}` : text || empty;
    pre.dataset.offset = String(next);
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  // One read at a time; a call during one reads again after it.
  function poll() {
    if (reading) { again = true; return reading; }
    reading = (async () => {
      const mine = generation;
      try {
        for (let i = 0; i < MAX_READS; i++) {
          const first = next === null;
          const r = await getText(query(first ? `tail=${TAIL_LINES}` : `offset=${next}`));
          if (disposed || mine !== generation) return;
          const at = Number(r.headers.get('X-Next-Offset'));
          text += r.text;
          if (Number.isFinite(at)) next = at;
          else if (first) next = 0;
          render();
          if (first || !r.text) break;
        }
      } catch (e) {
        if (!disposed && mine === generation && !text) pre.textContent = e.message;
      } finally {
        reading = null;
        if (again && !disposed) { again = false; poll(); }
      }
    })();
    return reading;
  }

  return { controls, pre, setRanks, poll, dispose() { disposed = true; } };
}
