// Live updates: one EventSource per page on ddpd's server-sent events (/events or
// /runs/{id}/events). The browser reconnects by itself with Last-Event-ID and the
// server replays what was missed; when the browser gives up (the server answered
// with an error, e.g. while restarting) this opens a new stream that asks for the
// events after the last one it saw (?last_event_id=). The connection's state goes
// to the header's indicator and to the "connection lost" banner. The token goes as
// ?access_token= (an EventSource sends no headers); a stream the server refuses
// makes the page ask whether the token still reads (a 401 brings the sign-in back).
import { noticeUnauthorized, probe, streamUrl } from './api.js';

const EVENT_TYPES = ['ready', 'run', 'rank', 'epoch', 'checkpoint', 'attempt', 'deleted', 'step', 'heartbeat', 'sweep'];
const stateListeners = new Set();
let currentState = 'idle', open_streams = 0;

// 'idle' (no stream open) | 'connecting' | 'live' | 'lost'
export function onConnectionState(fn) { stateListeners.add(fn); fn(currentState); return () => stateListeners.delete(fn); }
function setState(s) {
  if (s === currentState) return;
  currentState = s;
  for (const fn of stateListeners) fn(s);
}

// Opens `path` and calls handlers[type](data, event) for each event; returns close().
export function subscribe(path, handlers) {
  let es = null, lastId = null, closed = false, retryTimer = null, lostTimer = null;
  open_streams++;
  setState('connecting');

  function open() {
    const url = lastId === null ? path : `${path}${path.includes('?') ? '&' : '?'}last_event_id=${encodeURIComponent(lastId)}`;
    es = new EventSource(streamUrl(url));
    es.onopen = () => { clearTimeout(lostTimer); setState('live'); };
    es.onerror = () => {
      if (closed) return;
      // A moment of reconnecting is normal; say "lost" only when it lasts.
      clearTimeout(lostTimer);
      lostTimer = setTimeout(() => setState('lost'), 1500);
      if (es.readyState === EventSource.CLOSED) {
        es = null;
        probe().then((p) => { if (p === 'unauthorized' && !closed) noticeUnauthorized(); });
        clearTimeout(retryTimer);
        retryTimer = setTimeout(open, 3000);
      }
    };
    for (const type of EVENT_TYPES) {
      es.addEventListener(type, (e) => {
        if (e.lastEventId) lastId = e.lastEventId;
        const fn = handlers[type];
        if (!fn) return;
        let data = null;
        try { data = JSON.parse(e.data); } catch { return; }
        fn(data, e);
      });
    }
  }
  open();
  return () => {
    if (closed) return;
    closed = true;
    if (--open_streams === 0) setState('idle');
    clearTimeout(retryTimer);
    clearTimeout(lostTimer);
    if (es) es.close();
  };
}
