// What the browser tests share: a real ddpd (the built binary, the real trainer,
// Fashion-MNIST) on a loopback port with a temporary state dir, restartable on the
// same port; a work root for command runs (the user's own script, through ddp-run);
// headless Debian chromium driven by playwright-core (never a downloaded browser),
// with the flags that keep it off the network; and polling with deadlines.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

export const DDPD = process.env.DDPD_BIN;
export const TRAINER = process.env.DDP_TRAINER;
export const RUNNER = process.env.DDP_RUN; // ddp-run: command runs
export const TORCH_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'commands', 'ddp_fmnist.py');
export const ARTIFACTS = process.env.DDPD_TEST_ARTIFACTS || path.resolve('test-artifacts/web');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

export class Server {
  constructor(extraArgs = []) {
    this.extraArgs = extraArgs;
    this.stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ddpd-web-test-'));
    this.port = 0;
    this.proc = null;
    this.log = '';
  }

  async start() {
    if (!DDPD || !TRAINER) throw new Error('set DDPD_BIN and DDP_TRAINER (ctest does)');
    const args = ['serve', '--listen', `127.0.0.1:${this.port}`, '--state-dir', this.stateDir, '--slots', '2',
      '--data-root', '/usr/share/datasets', '--gpus', 'none', '--trainer', TRAINER, '--cancel-grace', '3', ...this.extraArgs];
    this.proc = spawn(DDPD, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stderr.on('data', (d) => { this.log = (this.log + d).slice(-20000); });
    const line = await new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`ddpd did not start: ${this.log}`)), 30000);
      this.proc.stdout.on('data', (d) => {
        out += d;
        const m = /listening on http:\/\/[^:]+:(\d+)/.exec(out);
        if (m) { clearTimeout(timer); resolve(m); }
      });
      this.proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`ddpd exited (${code}): ${this.log}`)); });
    });
    this.port = Number(line[1]);
    this.url = `http://127.0.0.1:${this.port}`;
  }

  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    const done = new Promise((resolve) => this.proc.once('exit', resolve));
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 30000);
    await done;
    clearTimeout(timer);
  }

  async api(method, p, body) {
    const res = await fetch(this.url + p, {
      method, headers: body ? { 'Content-Type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  }

  cleanup() { fs.rmSync(this.stateDir, { recursive: true, force: true }); }
}

// A port free now with `width` above it, away from torchrun's 29400 and 29500: each
// server leases MASTER_PORTs from its own range (other tests run servers beside it).
async function freePortRange(width = 40) {
  for (let i = 0; i < 50; i++) {
    const lo = await new Promise((resolve, reject) => {
      const s = net.createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
    });
    if (lo + width <= 65535 && !(lo <= 29500 && 29500 <= lo + width) && !(lo <= 29400 && 29400 <= lo + width)) return [lo, lo + width];
  }
  return [40000, 40000 + width];
}

// A temporary work root for command runs, with `files` ({ 'dir/name': text }) in it, and
// the flags a server needs to run them there: { root, args, cleanup() }.
export async function commandWorkRoot(files = {}) {
  if (!RUNNER) throw new Error('set DDP_RUN to ddp-run (ctest does)');
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'ddpd-web-work-')));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
  const [lo, hi] = await freePortRange();
  return {
    root,
    // a root server refuses command runs that would run as root (docs/security.md, Who can
    // do what): these tests, run as root in CI, are not about that, and say so knowingly
    args: ['--allow-commands', '--runner', RUNNER, '--work-root', root, '--port-range', `${lo}-${hi}`,
      ...(process.getuid && process.getuid() === 0 ? ['--unsafe-commands-as-server'] : [])],
    cleanup() { fs.rmSync(root, { recursive: true, force: true }); },
  };
}

export async function launchBrowser() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is not there: install Debian's chromium (scripts/install-deps.sh)`);
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch {
    throw new Error('playwright-core is not installed: run scripts/install-deps.sh (it runs npm ci at the top of the tree)');
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ddpd-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  context.profileDir = profile;
  return context;
}

export async function closeBrowser(context) {
  await context.close();
  fs.rmSync(context.profileDir, { recursive: true, force: true });
}

// Polls fn() until it returns something truthy; throws with `what` at the deadline.
export async function until(fn, what, timeoutMs = 60000, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try { last = await fn(); } catch (e) { last = e; }
    if (last && !(last instanceof Error)) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export function fmnist(over = {}) {
  const cfg = {
    name: 'fmnist-mlp',
    model: { hidden: [512, 256] },
    data: {
      train: { images: 'fashion-mnist/train-images-idx3-ubyte.gz', labels: 'fashion-mnist/train-labels-idx1-ubyte.gz' },
      test: { images: 'fashion-mnist/t10k-images-idx3-ubyte.gz', labels: 'fashion-mnist/t10k-labels-idx1-ubyte.gz' },
      limit: 4000, test_limit: 1000,
    },
    train: { epochs: 5, batch_size: 16, lr_schedule: { type: 'step', step_epochs: 2, gamma: 0.3 } },
    distributed: { world_size: 2 },
  };
  return merge(cfg, over);
}

function merge(a, b) {
  for (const [k, v] of Object.entries(b)) {
    if (v && typeof v === 'object' && !Array.isArray(v) && a[k] && typeof a[k] === 'object') merge(a[k], v);
    else a[k] = v;
  }
  return a;
}

// One element (a card) at the page's current width: `${name}.png` in ARTIFACTS.
export async function elementShot(locator, name) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  await locator.screenshot({ path: file });
  return file;
}

// The whole page. The page keeps an EventSource open (live updates), so it never
// goes idle: wait for what should be drawn (a selector, a data- attribute), then
// take the picture; see tests/integration/web/README.md for screenshots by hand.
export async function screenshot(page, name) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

// A file of browser cases against one server and one headless Chromium, started before
// the first case and stopped after the last: suite.it(name, fn) is a case that counts
// toward the closing "LABEL: N passed, N failed" line and prints the server's log when
// it fails; suite.open(hash, width) a page on the server that records its script
// errors (page.errors) and accepts dialogs. suite.server may be swapped for a case
// that needs a server of its own.
export function browserSuite(label, timeout) {
  const suite = { server: null, browser: null };
  let passed = 0, failed = 0;
  before(async () => {
    suite.server = new Server();
    await suite.server.start();
    suite.browser = await launchBrowser();
  });
  after(async () => {
    if (suite.browser) await closeBrowser(suite.browser);
    if (suite.server) { await suite.server.stop(); suite.server.cleanup(); }
    console.log(`${label}: ${passed} passed, ${failed} failed`);
  });
  suite.it = (name, fn) => test(name, { timeout }, async () => {
    try { await fn(); passed++; } catch (e) {
      failed++;
      if (suite.server) process.stderr.write(`---- ddpd log ----\n${suite.server.log.slice(-4000)}\n`);
      throw e;
    }
  });
  suite.open = async (hash, width = 1280) => {
    const page = await suite.browser.newPage();
    await page.setViewportSize({ width, height: 900 });
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(e.message));
    page.on('dialog', (d) => d.accept());
    await page.goto(`${suite.server.url}/${hash}`);
    return page;
  };
  return suite;
}
