// Who the dashboard acts as: the user whose token is stored (GET /users/me), for the
// header's Token button and the runs list's "mine" filter. Asked again when the token
// changes; pages listen with onWho.
import { whoami } from './api.js';

let current = null; // {kind, name, admin, ...} or null
const listeners = new Set();

export function who() { return current; }

// Calls fn(who) now and whenever it changes; returns a function that stops it.
export function onWho(fn) { listeners.add(fn); fn(current); return () => listeners.delete(fn); }

export async function refreshWho() {
  current = await whoami();
  for (const fn of listeners) fn(current);
  return current;
}
