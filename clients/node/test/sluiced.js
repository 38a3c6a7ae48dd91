// What the tests against a real sluiced need: the binary ($SLUICED, relative to the
// repository root, else build/asan/bin/sluiced, else build/bin/sluiced, as
// tests/lib/harness.py finds it), free 127.0.0.1 ports, a process started on them and
// stopped by its PID, and its decisions read from /metrics.

import { spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

// What a sanitizer writes when it finds something: a server whose log has one failed,
// whatever its exit status.
const SANITIZER_MARKS = ['ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'runtime error:',
  'ThreadSanitizer', 'SUMMARY: UndefinedBehaviorSanitizer'];

const executable = (p) => {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

export function sluicedBinary() {
  const env = process.env.SLUICED;
  if (env) return isAbsolute(env) ? env : join(ROOT, env);
  for (const cand of ['build/asan/bin/sluiced', 'build/bin/sluiced']) {
    if (executable(join(ROOT, cand))) return join(ROOT, cand);
  }
  return join(ROOT, 'build/bin/sluiced');
}

function ephemeralLow() {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]) || 32768;
  } catch {
    return 32768;
  }
}

function listenOnce(port) {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', () => resolve(null));
    srv.listen(port, '127.0.0.1', () => {
      const got = srv.address().port;
      srv.close(() => resolve(got));
    });
  });
}

/** A port nobody listens on now, for a server told its port before it starts. Drawn
 * below the kernel's ephemeral range, which outgoing connections and binds to port 0
 * take their ports from, so that only another listener given the same number could
 * take it meanwhile (start() survives that by trying again elsewhere). */
export async function freePort() {
  const low = ephemeralLow();
  for (let i = 0; low > 20000 && i < 64; i++) {
    const got = await listenOnce(20000 + Math.floor(Math.random() * (low - 20000)));
    if (got !== null) return got;
  }
  const got = await listenOnce(0);
  if (got === null) throw new Error('freePort: cannot bind 127.0.0.1');
  return got;
}

const pause = (ms) => new Promise((r) => setTimeout(r, ms));

/** A sluiced with RESP on .port and HTTP on .httpPort, 127.0.0.1 only. */
export class Sluiced {
  constructor(args = []) {
    this.binary = sluicedBinary();
    this.args = args;
    this.workdir = mkdtempSync(join(tmpdir(), 'sluice-clientnode-'));
    this.log = join(this.workdir, 'sluiced.log');
    this.proc = null;
    this.exit = null;
  }

  get url() { return `http://127.0.0.1:${this.httpPort}`; }

  /** A file in the server's directory (a config), for args that name one. */
  writeFile(name, text) {
    const p = join(this.workdir, name);
    writeFileSync(p, text);
    return p;
  }

  output() {
    try {
      return readFileSync(this.log, 'utf8');
    } catch {
      return '';
    }
  }

  /** Starts on free ports and waits for /healthz; a second and third try elsewhere when a
   * port was taken meanwhile. Throws with the log when it never answers. */
  async start() {
    if (!executable(this.binary)) throw new Error(`sluiced is not built: ${this.binary} (run make, or set SLUICED)`);
    for (let tries = 0; tries < 3; tries++) {
      this.port = await freePort();
      this.httpPort = await freePort();
      const out = openSync(this.log, 'w');
      const argv = ['--port', String(this.port), '--http-port', String(this.httpPort),
        '--bind', '127.0.0.1', '--threads', '2', ...this.args];
      this.proc = spawn(this.binary, argv, { cwd: this.workdir, stdio: ['ignore', out, out] });
      this.exit = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
      this.exited = false;
      this.exit.then(() => { this.exited = true; });
      if (await this.#waitReady()) return this;
      if (!this.exited) {
        process.kill(this.proc.pid, 'SIGKILL');
        await this.exit;
        throw new Error(`sluiced did not answer within 20 s on port ${this.httpPort}:\n${this.output()}`);
      }
      if (!/in use/i.test(this.output())) break;
    }
    throw new Error(`sluiced exited during start-up (${JSON.stringify(await this.exit)}):\n${this.output()}`);
  }

  async #waitReady() {
    const deadline = performance.now() + 20000;
    while (performance.now() < deadline) {
      if (this.exited) return false;
      try {
        const r = await fetch(`${this.url}/healthz`, { signal: AbortSignal.timeout(2000) });
        if ((await r.json()).status === 'ok') return true;
      } catch {
        // not listening yet
      }
      await pause(20);
    }
    return false;
  }

  /** SIGTERM by PID, SIGKILL after 15 s; throws unless it exited 0 with no sanitizer report. */
  async stop() {
    if (!this.proc) return;
    let killed = false;
    if (!this.exited) {
      process.kill(this.proc.pid, 'SIGTERM');
      const timer = setTimeout(() => {
        killed = true;
        if (!this.exited) process.kill(this.proc.pid, 'SIGKILL');
      }, 15000);
      await this.exit;
      clearTimeout(timer);
    }
    const { code, signal } = await this.exit;
    const out = this.output();
    rmSync(this.workdir, { recursive: true, force: true });
    if (killed) throw new Error(`sluiced did not stop on SIGTERM:\n${out}`);
    if (code !== 0) throw new Error(`sluiced exited ${code ?? signal}:\n${out}`);
    for (const mark of SANITIZER_MARKS) if (out.includes(mark)) throw new Error(`sanitizer report:\n${out}`);
  }

  /** { allowed, rejected } of ad-hoc limits, from /metrics. */
  async decisions() {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    const got = { allowed: 0, rejected: 0 };
    for (const m of text.matchAll(/^sluice_decisions_total\{policy="",outcome="(\w+)"\} (\d+)$/gm)) {
      got[m[1]] = Number(m[2]);
    }
    return { allowed: got.allowed, rejected: got.rejected };
  }

  checkUrl(key, limit, period, cost = 1) {
    return `${this.url}/v1/check?key=${encodeURIComponent(key)}&limit=${limit}&period=${period}&cost=${cost}`;
  }
}
