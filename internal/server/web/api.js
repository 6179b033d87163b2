// Talking to aot serve: JSON requests with the dashboard's cookie, the
// event streams, and what the page shows when the token is missing.
import { el, fill } from './dom.js';

export const AUTH_MESSAGE = 'Not signed in: open the URL that aot serve printed (it holds the access token), e.g. http://127.0.0.1:PORT/?token=…';

export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let signedOut = false;
const streams = new Set();

// request sends a JSON request; it answers the decoded body, or throws an
// APIError carrying the server's {"error": ...} message.
export async function request(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch {
    throw new APIError(0, 'aot serve does not answer: is it still running?');
  }
  if (resp.status === 401) {
    signOut();
    throw new APIError(401, AUTH_MESSAGE);
  }
  const type = resp.headers.get('Content-Type') || '';
  const doc = type.includes('json') ? await resp.json().catch(() => null) : await resp.text();
  if (!resp.ok) {
    const msg = doc && typeof doc === 'object' && doc.error ? doc.error : `${method} ${path}: HTTP ${resp.status}`;
    throw new APIError(resp.status, msg);
  }
  return doc;
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body || {});

export const loopPath = (id, sub) => `/api/loops/${encodeURIComponent(id)}${sub || ''}`;

// stream opens an EventSource. handlers maps event kinds to functions of
// the parsed data. A stream the browser gave up on (an answer that is not
// a stream: the token is gone, or the server restarted without it) is
// looked into and opened again.
export function stream(path, handlers) {
  const s = { es: null, closed: false, retry: null };
  const open = () => {
    const es = new EventSource(path, { withCredentials: true });
    s.es = es;
    es.onopen = () => live('live');
    es.onerror = () => {
      if (s.closed) return;
      live('reconnecting');
      if (es.readyState === EventSource.CLOSED) {
        s.retry = setTimeout(async () => {
          try {
            await get('/api/loops?probe=1');
          } catch (e) {
            if (e.status === 401) return;
          }
          if (!s.closed) open();
        }, 2000);
      }
    };
    for (const [kind, fn] of Object.entries(handlers)) {
      es.addEventListener(kind, (ev) => {
        let data;
        try {
          data = JSON.parse(ev.data);
        } catch {
          return;
        }
        fn(data, ev);
      });
    }
  };
  s.close = () => {
    s.closed = true;
    clearTimeout(s.retry);
    if (s.es) s.es.close();
    streams.delete(s);
  };
  if (!signedOut) {
    streams.add(s);
    open();
  }
  return s;
}

function live(what) {
  const n = document.getElementById('live');
  if (!n) return;
  n.dataset.state = what;
  n.textContent = { live: 'live', reconnecting: 'reconnecting…', signedout: 'signed out' }[what] || what;
}

function signOut() {
  if (signedOut) return;
  signedOut = true;
  for (const s of [...streams]) s.close();
  live('signedout');
  banner(AUTH_MESSAGE, 'auth', false);
}

// banner shows a message above the page; errors stay until dismissed.
export function banner(message, kind, dismissable = true) {
  const n = document.getElementById('banner');
  fill(n, el('span', null, message),
    dismissable ? el('button', { type: 'button', class: 'link', onclick: () => { n.hidden = true; } }, 'dismiss') : null);
  n.dataset.kind = kind || 'error';
  n.hidden = false;
}

export const isSignedOut = () => signedOut;
