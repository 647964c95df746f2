/** One scrape of `GET /metrics`, read the way Prometheus reads the text format. */
export interface Scrape {
  status: number;
  contentType: string;
  text: string;
  /** The sample `name{labels}`, with exactly these labels; 0 when absent (a counter not yet moved). */
  value(name: string, labels?: Record<string, string>): number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export async function scrape(baseUrl: string, headers: Record<string, string> = {}): Promise<Scrape> {
  const response = await fetch(`${baseUrl}/metrics`, { headers });
  const text = await response.text();
  const samples: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    const match = SAMPLE.exec(line);
    if (!match || line.startsWith('#')) continue;
    const labels = Object.fromEntries([...(match[2] ?? '').matchAll(LABEL)].map((m) => [m[1]!, m[2]!]));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  const same = (a: Record<string, string>, b: Record<string, string>) =>
    Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v);
  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? '',
    text,
    value: (name, labels = {}) => samples.find((s) => s.name === name && same(s.labels, labels))?.value ?? 0,
  };
}
