import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';

/** What an operator writes in the environment, and what the service makes of it (or refuses at start). */
describe('configuration of limits and origins', () => {
  it('rate limits per tier come from RATE_LIMIT_<TIER> for any tier name; the window, the default and the keyless limit have their own', () => {
    const config = loadConfig({
      RATE_LIMIT_PRO: '5000',
      RATE_LIMIT_PRO_PLUS: '0',
      RATE_LIMIT_WINDOW_MS: '1000',
      RATE_LIMIT_DEFAULT: '50',
      RATE_LIMIT_ANONYMOUS: '10',
    });
    expect(config.limits.rate).toEqual({ windowMs: 1000, perTier: { free: 300, pro: 5000, pro_plus: 0 }, default: 50, anonymous: 10 });
    expect(loadConfig({}).limits).toEqual({
      rate: { windowMs: 60_000, perTier: { free: 300, pro: 1200 }, default: 300, anonymous: 120 },
      maxSubscriptionsPerKey: 100,
      maxStreamsPerKey: 10,
      slotTtlMs: 30_000,
    });
  });

  it('refuses limits that are not whole numbers, naming the variable', () => {
    expect(() => loadConfig({ RATE_LIMIT_PRO: 'lots', RATE_LIMIT_WINDOW_MS: '0' })).toThrow(
      /^Invalid configuration: RATE_LIMIT_WINDOW_MS: .+; RATE_LIMIT_PRO: must be a whole number of requests \(0 for no limit\)$/,
    );
    expect(() => loadConfig({ MAX_STREAMS_PER_KEY: '-1' })).toThrow(/MAX_STREAMS_PER_KEY/);
  });

  it('CORS_ORIGINS takes * or origins (a trailing slash is forgiven); anything else stops the start', () => {
    expect(loadConfig({}).http.corsOrigins).toBe('*');
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.com/, http://localhost:3000' }).http.corsOrigins).toEqual([
      'https://app.example.com',
      'http://localhost:3000',
    ]);
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.com,*' }).http.corsOrigins).toBe('*');
    for (const bad of ['app.example.com', 'https://app.example.com/path', 'null'])
      expect(() => loadConfig({ CORS_ORIGINS: bad })).toThrow(/^Invalid configuration: CORS_ORIGINS: /);
  });

  it('TRUST_PROXY is off by default, and takes true, a number of hops or proxy addresses', () => {
    expect(loadConfig({}).http.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'true' }).http.trustProxy).toBe(true);
    expect(loadConfig({ TRUST_PROXY: '2' }).http.trustProxy).toBe(2);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, ::1' }).http.trustProxy).toEqual(['10.0.0.0/8', '::1']);
    expect(() => loadConfig({ TRUST_PROXY: 'the load balancer' })).toThrow(/^Invalid configuration: TRUST_PROXY: /);
  });
});
