// Submitting a run (#/submit): a JSON editor prefilled with the defaults of the
// schema the server validates with (GET /schema/run-config.schema.json), the
// description of the field under the caret, and the server's validation errors: next
// to the line of the field each names on a wide screen; on a phone, where a note
// would cover the lines below it and take their taps, the line is marked in the
// gutter and the error shows under the editor while the caret is on it (and all are
// listed above the editor).
import { ApiError, get, post } from './api.js';
import { h } from './format.js';
import { lineOf, pointerAtLine } from './json_lines.js';

const LINE_PX = 20, PAD_PX = 8; // must match .editor textarea in style.css

function resolve(schema, node) {
  while (node && node.$ref && node.$ref.startsWith('#/')) {
    const target = node.$ref.slice(2).split('/').reduce((n, k) => (n ? n[k] : undefined), schema);
    node = { ...target, ...node, $ref: undefined };
  }
  return node;
}

// The config every default makes, nested objects filled in. A nested object whose
// required members have no default is left out (warm_start: its imports are the
// user's to name; an empty one would be refused).
export function schemaDefaults(schema, node = schema) {
  const root = node === schema;
  node = resolve(schema, node);
  if (!node) return undefined;
  if (node.type === 'object' && node.properties) {
    const out = {};
    for (const [k, child] of Object.entries(node.properties)) {
      const v = schemaDefaults(schema, child);
      if (v !== undefined) out[k] = v;
    }
    if (!root && (node.required || []).some((k) => !(k in out))) return undefined;
    return out;
  }
  return node.default === undefined ? undefined : JSON.parse(JSON.stringify(node.default));
}

function schemaAt(schema, pointer) {
  let node = schema;
  for (const part of pointer.split('/').slice(1)) {
    node = resolve(schema, node);
    if (!node) return null;
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    node = node.properties ? node.properties[key] : node.items;
  }
  return resolve(schema, node);
}

export function mountSubmit(root) {
  let schema = null, defaultsText = '';
  const text = h('textarea', { id: 'config-text', spellcheck: 'false', wrap: 'off', autocapitalize: 'off', 'aria-label': 'run config (JSON)' });
  const gutter = h('div', { class: 'gutter', 'aria-hidden': 'true' });
  const layer = h('div', { class: 'error-layer', id: 'error-layer' });
  const help = h('p', { class: 'field-help', id: 'field-help' }, ' ');
  const summary = h('div', { id: 'submit-errors', hidden: true });
  const submitBtn = h('button', { class: 'button primary', id: 'submit-run', onclick: submit }, 'Submit run');
  const resetBtn = h('button', { class: 'button', id: 'reset-config', onclick: () => { setText(defaultsText); clearErrors(); } }, 'Reset to defaults');
  const status = h('span', { class: 'action-msg', id: 'submit-status' });
  let errors = []; // [{pointer, message, line}]

  root.append(
    h('p', {}, h('a', { href: '#/' }, '← Runs')),
    h('div', { class: 'page-head' }, h('h1', {}, 'Submit a run'), h('button', { class: 'button primary', id: 'submit-run-top', onclick: submit }, 'Submit run')),
    h('p', { class: 'muted' }, 'The config, prefilled with every default of the schema the server checks it against. ',
      'Data paths are relative to the server\'s data roots (Fashion-MNIST is ', h('code', {}, 'fashion-mnist/…'), ').'),
    summary,
    h('div', { class: 'editor', id: 'config-editor' }, gutter, h('div', { class: 'editor-main' }, text, layer)),
    help,
    h('div', { class: 'actions' }, submitBtn, resetBtn, status));

  function lines() { return text.value.split('\n').length; }

  function layout() {
    const n = lines();
    text.style.height = `${n * LINE_PX + 2 * PAD_PX + 16}px`; // grows with the text: errors stay by their line
    const bad = new Set(errors.map((e) => e.line));
    gutter.replaceChildren(...Array.from({ length: n }, (_, i) => h('div', {
      class: bad.has(i) ? 'bad' : '', title: bad.has(i) ? 'the server refused this line: tap to see why' : undefined,
      onclick: bad.has(i) ? () => goToLine(i) : undefined,
    }, String(i + 1))));
    layer.replaceChildren(...errors.map((e) => h('div', {
      class: 'field-error', 'data-pointer': e.pointer, style: `top:${PAD_PX + e.line * LINE_PX}px`, role: 'alert',
    }, h('strong', {}, e.pointer || '(the document)'), ' ', e.message)));
  }

  function setText(t) { text.value = t; layout(); showHelp(); }

  function clearErrors() {
    errors = [];
    summary.hidden = true;
    layout();
    showHelp();
  }

  function showHelp() {
    const line = text.value.slice(0, text.selectionStart).split('\n').length - 1;
    const here = errors.filter((e) => e.line === line);
    help.classList.toggle('has-error', here.length > 0);
    if (here.length) { // the caret is on a line the server refused
      help.replaceChildren(...here.map((e) => h('span', { class: 'help-error', 'data-pointer': e.pointer },
        h('strong', {}, e.pointer || '(the document)'), ' ', e.message, ' ')));
      return;
    }
    if (!schema) return;
    const ptr = pointerAtLine(text.value, line);
    const node = ptr ? schemaAt(schema, ptr) : null;
    if (!node || !node.description) { help.textContent = ' '; return; }
    const extra = [];
    if (node.enum) extra.push(`one of ${node.enum.join(', ')}`);
    if (node.default !== undefined && typeof node.default !== 'object') extra.push(`default ${JSON.stringify(node.default)}`);
    help.replaceChildren(h('code', {}, ptr), ' ', node.description, extra.length ? ` (${extra.join('; ')})` : '');
  }

  function showErrors(message, list) {
    const t = text.value;
    errors = (list.length ? list : [{ pointer: '', message }]).map((e) => {
      let line = lineOf(t, e.pointer);
      const m = !e.pointer && /line (\d+)/.exec(e.message); // a JSON syntax error says where
      if (m) line = Math.max(0, Number(m[1]) - 1);
      return { ...e, line };
    });
    summary.hidden = false;
    summary.className = 'error-box';
    showHelp();
    summary.replaceChildren(
      h('strong', {}, errors.length > 1 ? `The server refused the config: ${errors.length} problems.` : 'The server refused the config.'),
      h('ul', {}, errors.map((e) => h('li', {}, h('a', { href: '#/submit', onclick: (ev) => { ev.preventDefault(); goToLine(e.line); } },
        h('code', {}, e.pointer || '(the document)')), ': ', e.message))));
    layout();
  }

  function goToLine(line) {
    const starts = text.value.split('\n').slice(0, line).reduce((n, l) => n + l.length + 1, 0);
    text.focus({ preventScroll: true });
    text.setSelectionRange(starts, starts);
    // the line itself into view (the editor grows with its text: it may be taller than the window)
    const lineTop = text.getBoundingClientRect().top + window.scrollY + PAD_PX + line * LINE_PX;
    window.scrollTo({ top: Math.max(0, lineTop - window.innerHeight / 3) });
    showHelp();
  }

  async function submit() {
    submitBtn.disabled = true;
    status.textContent = 'Submitting…';
    status.className = 'action-msg';
    try {
      const run = await post('/runs', text.value);
      clearErrors();
      location.hash = `#/runs/${run.id}`;
    } catch (e) {
      status.textContent = '';
      if (e instanceof ApiError && e.status === 400) showErrors(e.message, e.errors);
      else { status.textContent = e.message; status.className = 'action-msg error'; }
    } finally {
      submitBtn.disabled = false;
    }
  }

  text.addEventListener('input', () => { if (lines() !== gutter.childElementCount) layout(); });
  for (const ev of ['keyup', 'click', 'focus']) text.addEventListener(ev, showHelp);
  text.addEventListener('keydown', (e) => { // Tab indents, as in an editor
    if (e.key !== 'Tab' || e.shiftKey) return;
    e.preventDefault();
    text.setRangeText('  ', text.selectionStart, text.selectionEnd, 'end');
  });

  let pending = null;
  try { pending = sessionStorage.getItem('ddpd.resubmit'); sessionStorage.removeItem('ddpd.resubmit'); } catch { /* none */ }
  setText(pending || 'Loading the schema…');
  get('/schema/run-config.schema.json').then((s) => {
    schema = s;
    defaultsText = JSON.stringify(schemaDefaults(s), null, 2);
    if (!pending) setText(defaultsText);
    text.dataset.ready = 'true';
  }).catch((e) => {
    status.textContent = `The schema could not be loaded: ${e.message}`;
    status.className = 'action-msg error';
  });
  return () => {};
}
