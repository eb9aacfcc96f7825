/** `--queue` URLs: TLS, credentials and the messages that quote them (src/archive/queue-url.ts). */
import { describe, expect, it } from 'vitest';
import { parseQueueUrl } from '../../src/archive/queue-url.js';
import { UsageError } from '../../src/cli/args.js';

describe('parseQueueUrl', () => {
  it('rediss:// connects with TLS, checked against the host named in the URL', () => {
    const a = parseQueueUrl('rediss://:pw@redis.example.org:6380/q');
    expect(a.connection).toMatchObject({
      host: 'redis.example.org',
      port: 6380,
      password: 'pw',
      tls: { servername: 'redis.example.org' },
    });
    expect(a.shown).toBe('rediss://redis.example.org:6380/q');
    // An address has no name to check a certificate's against: Node's TLS defaults.
    expect(parseQueueUrl('rediss://10.0.0.5/q').connection).toMatchObject({ host: '10.0.0.5', tls: {} });
    expect(parseQueueUrl('rediss://[::1]:7000/q').connection).toMatchObject({ host: '::1', port: 7000, tls: {} });
    expect(parseQueueUrl('redis://redis.example.org/q').connection).not.toHaveProperty('tls');
  });

  it('a user and password, escaped characters included; a password alone is the default user', () => {
    expect(parseQueueUrl('redis://worker:p%40ss%3Aw%25rd@h:1/q').connection).toMatchObject({
      username: 'worker',
      password: 'p@ss:w%rd',
    });
    const alone = parseQueueUrl('redis://:secret@h:1/q').connection;
    expect(alone).toMatchObject({ password: 'secret' });
    expect(alone).not.toHaveProperty('username');
  });

  it('a lone "%" is a usage error saying how to write it; no message quotes the password', () => {
    expect(() => parseQueueUrl('redis://:50%off@h:1/q')).toThrow(
      /the password .* has a "%" that starts no %XX escape: write "%" as %25/,
    );
    for (const bad of [
      'redis://:hunter2@h:1',
      'redis://u:hunter2@h:1/a:b',
      'http://:hunter2@h:1/q',
      'redis://:50%hunter2@h:1/q',
    ]) {
      let message = '';
      try {
        parseQueueUrl(bad);
      } catch (e) {
        expect(e, bad).toBeInstanceOf(UsageError);
        message = (e as Error).message;
      }
      expect(message, bad).not.toBe('');
      expect(message, bad).not.toMatch(/hunter2/);
      expect(message, bad).toMatch(/:\*\*\*@h:1/);
    }
  });
});
