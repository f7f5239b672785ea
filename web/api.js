// The dashboard's HTTP client: JSON requests to ddpd, the token (a user's, or the
// server's: kept in localStorage until "Sign out", sent as "Authorization: Bearer" on
// every request: a server with users answers no read without one), and errors as the
// server words them (application/problem+json: detail, errors[]); getText for an
// answer whose headers say something (the logs' next offset). A read answered 401 (no
// token, or one the server no longer knows) is told to onUnauthorized's listeners:
// the page asks for a token again. A GET answered with an ETag is revalidated with
// If-None-Match the next time (a 304 gives back what was read then).

const TOKEN_KEY = 'ddpd.token';

export function getToken() {
  try { return localStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(token) {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch { /* private mode: the token lasts this page */ }
}

// An error the page can show as it is: `message` is a sentence; `errors` the
// server's [{pointer, message}] for a refused config; `status` 0 when unreachable.
export class ApiError extends Error {
  constructor(status, message, errors = []) {
    super(message);
    this.status = status;
    this.errors = errors;
  }
}

// Who the stored token is (GET /users/me): {kind, name, admin, ...}, or null when the
// server knows no such token (or none is stored on a server that needs one).
export async function whoami() {
  const token = getToken();
  try {
    const res = await fetch('/users/me', { headers: token ? { Authorization: `Bearer ${token}` } : {}, cache: 'no-store' });
    return res.ok ? await res.json() : null;
  } catch { return null; }
}

// The event stream `path` with the token as ?access_token= (an EventSource cannot
// send headers; ddpd takes it there on its event streams only, and never logs it).
export function streamUrl(path) {
  const token = getToken();
  return token ? `${path}${path.includes('?') ? '&' : '?'}access_token=${encodeURIComponent(token)}` : path;
}

const unauthorizedListeners = new Set();
// Called when a read is refused for want of a token the server knows.
export function onUnauthorized(fn) { unauthorizedListeners.add(fn); return () => unauthorizedListeners.delete(fn); }
export function noticeUnauthorized() { for (const fn of unauthorizedListeners) fn(); }

// Whether this page may read ddpd with the token it has: 'ok', 'unauthorized' (the
// server has users and no token it knows was sent) or 'offline'.
export async function probe() {
  const token = getToken();
  try {
    const res = await fetch('/runs?limit=1', { headers: token ? { Authorization: `Bearer ${token}` } : {}, cache: 'no-store' });
    return res.status === 401 ? 'unauthorized' : 'ok';
  } catch { return 'offline'; }
}

const listeners = new Set();
// Called with true/false as requests reach ddpd or fail to.
export function onReachability(fn) { listeners.add(fn); return () => listeners.delete(fn); }
function reachable(ok) { for (const fn of listeners) fn(ok); }

// What a GET answered with an ETag (ddpd's GET /runs and GET /runs/{id}), by path:
// { etag, token, value }. The next GET of that path sends If-None-Match and, answered
// 304 Not Modified, gives the value kept (a copy: pages change what they are given).
// The browser's own cache is left out (cache: 'no-store'), so that every answer the
// page acts on is the server's, and a 304 reaches this code as one.
const validated = new Map();
const VALIDATED_MAX = 500;

function remember(path, etag, value) {
  validated.delete(path);
  validated.set(path, { etag, token: getToken(), value });
  if (validated.size > VALIDATED_MAX) validated.delete(validated.keys().next().value);
}

// The response of a request that succeeded (res.ok, or 304 to a GET that sent
// If-None-Match); else throws an ApiError.
async function send(method, path, body) {
  const headers = { Accept: 'application/json' };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  const kept = method === 'GET' ? validated.get(path) : undefined;
  if (kept && kept.token === token) headers['If-None-Match'] = kept.etag;
  let init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch {
    reachable(false);
    throw new ApiError(0, 'ddpd cannot be reached: is it running?');
  }
  reachable(true);
  if (res.ok || (res.status === 304 && headers['If-None-Match'])) return res;
  const type = res.headers.get('Content-Type') || '';
  let problem = null;
  try { problem = type.includes('json') ? await res.json() : { detail: await res.text() }; } catch { /* empty */ }
  let message = (problem && problem.detail) || `${res.status} ${res.statusText}`;
  if (res.status === 401 && method === 'GET') noticeUnauthorized();
  if (res.status === 401) message = 'This server needs a token for this: set yours with the Token button at the top.';
  throw new ApiError(res.status, message, (problem && problem.errors) || []);
}

export async function request(method, path, body) {
  return (await answer(method, path, body)).value;
}

// { value, changed }: changed is false when a GET was answered 304 (the value is the
// one kept from the answer that ETag named).
async function answer(method, path, body) {
  const res = await send(method, path, body);
  if (res.status === 304) return { value: structuredClone(validated.get(path).value), changed: false };
  if (res.status === 204) return { value: null, changed: true };
  const value = (res.headers.get('Content-Type') || '').includes('json') ? await res.json() : await res.text();
  const etag = method === 'GET' ? res.headers.get('ETag') : null;
  if (etag) remember(path, etag, structuredClone(value));
  else if (method === 'GET') validated.delete(path);
  return { value, changed: true };
}

// A GET that says whether its answer changed since this page last read it:
// { value, changed } (changed false: the server answered 304 to its ETag).
export const revalidate = (path) => answer('GET', path);

// A GET whose headers matter too (the logs' X-Next-Offset): { text, headers }.
export async function getText(path) {
  const res = await send('GET', path);
  return { text: await res.text(), headers: res.headers };
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body);
