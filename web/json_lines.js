// Where a JSON pointer's value is in a JSON text: the line (0-based) of its key (or
// array element), so the submit form can show the server's error next to the field
// it names. A pointer to a member that is not in the text (a missing required one)
// lands on the nearest ancestor that is. Tolerant: on text it cannot read, it stops
// and answers what it knows.

export function pointerLines(text) {
  const lines = new Map(); // pointer -> line
  let i = 0, line = 0;
  const n = text.length;
  function ws() {
    while (i < n) {
      const c = text[i];
      if (c === '\n') { line++; i++; } else if (c === ' ' || c === '\t' || c === '\r') i++; else break;
    }
  }
  function str() {
    let s = '';
    i++; // opening quote
    while (i < n && text[i] !== '"') {
      if (text[i] === '\\') { s += text[i + 1] === 'n' ? '\n' : text[i + 1]; i += 2; } else { if (text[i] === '\n') line++; s += text[i++]; }
    }
    i++;
    return s;
  }
  const esc = (k) => k.replace(/~/g, '~0').replace(/\//g, '~1');
  function value(ptr) {
    ws();
    if (!lines.has(ptr)) lines.set(ptr, line);
    if (i >= n) throw new Error('end');
    const c = text[i];
    if (c === '{') {
      i++; ws();
      if (text[i] === '}') { i++; return; }
      for (;;) {
        ws();
        if (text[i] !== '"') throw new Error('key');
        const keyLine = line;
        const key = str();
        const child = `${ptr}/${esc(key)}`;
        lines.set(child, keyLine);
        ws();
        if (text[i] !== ':') throw new Error(':');
        i++;
        value(child);
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === '}') { i++; return; }
        throw new Error('}');
      }
    } else if (c === '[') {
      i++; ws();
      if (text[i] === ']') { i++; return; }
      for (let k = 0; ; k++) {
        ws();
        lines.set(`${ptr}/${k}`, line);
        value(`${ptr}/${k}`);
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === ']') { i++; return; }
        throw new Error(']');
      }
    } else if (c === '"') {
      str();
    } else {
      while (i < n && !',}]\n \t\r'.includes(text[i])) i++;
    }
  }
  try { value(''); } catch { /* partial: what was read stands */ }
  return lines;
}

// The line for `pointer`, or its nearest ancestor's; 0 when nothing matches.
export function lineOf(text, pointer) {
  const lines = pointerLines(text);
  let p = pointer || '';
  for (;;) {
    if (lines.has(p)) return lines.get(p);
    if (!p) return 0;
    p = p.slice(0, p.lastIndexOf('/'));
  }
}

// The pointer whose key is on `line` (the deepest), or ''.
export function pointerAtLine(text, line) {
  let best = '';
  for (const [p, l] of pointerLines(text)) if (l === line && p.length >= best.length) best = p;
  return best;
}
