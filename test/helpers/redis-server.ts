/**
 * A real redis-server for one test file: on a free localhost port, in a temp folder, with no
 * persistence (nothing written to disk) and in the foreground, so stopping it leaves nothing
 * behind. A machine without redis-server fails the test, with what to run.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { tempDir } from './temp.js';

export interface RedisServer {
  port: number;
  stop: () => Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** `password`: the server's requirepass, which clients then send (as the "default" user's). */
export async function startRedis(o: { password?: string } = {}): Promise<RedisServer> {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0)
    throw new Error(
      'redis-server is not installed (the archive queue tests run a real one): run scripts/system-packages.sh, ' +
        'which installs the Debian package redis-server',
    );
  const dir = tempDir('wnw-redis-');
  const port = await freePort();
  const server: ChildProcess = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
      '--dir',
      dir,
      ...(o.password !== undefined ? ['--requirepass', o.password] : []),
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start on port ${port}:\n${log}`)), 20_000);
    server.stdout!.on('data', (d: Buffer) => {
      log += d.toString();
      if (log.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve();
      }
    });
    server.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (code ${code}) on port ${port}:\n${log}`));
    });
  });
  return {
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        if (server.exitCode !== null) return resolve();
        server.once('exit', () => resolve());
        server.kill('SIGTERM');
      }),
  };
}
