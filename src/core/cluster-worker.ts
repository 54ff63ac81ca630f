/**
 * One service process of several (WORKERS > 1, src/core/cluster.ts): its number, and its side
 * of the primary's messages. A scrape of /metrics in any process asks the primary, which sums
 * every process's samples; a backup the primary took sets this process's metric.
 */
import cluster from 'node:cluster';
import { isClusterMessage, type ClusterMessage } from './cluster.ts';
import type { Metrics } from './metrics.ts';

export interface ClusterPlace {
  /** 1…count. */
  index: number;
  count: number;
}

/** This process's place among the WORKERS processes, or null when it runs alone. */
export function clusterPlace(env: NodeJS.ProcessEnv = process.env): ClusterPlace | null {
  if (!cluster.isWorker) return null;
  const index = Number(env.PLINTH_WORKER);
  const count = Number(env.PLINTH_WORKERS);
  return Number.isInteger(index) && index >= 1 && Number.isInteger(count) && count >= index ? { index, count } : null;
}

const SCRAPE_TIMEOUT_MS = 5000;

/** Answer the primary's requests for samples, and send /metrics scrapes to the primary. */
export function joinCluster(metrics: Metrics): void {
  const waiting = new Map<number, (r: { contentType: string; body: string } | null) => void>();
  let nextId = 1;
  process.on('message', (m: unknown) => {
    if (!isClusterMessage(m)) return;
    if (m.plinth === 'collect') {
      void metrics.local().then(
        (samples) => send({ plinth: 'collected', id: m.id, metrics: samples }),
        () => send({ plinth: 'collected', id: m.id, metrics: [] }),
      );
    } else if (m.plinth === 'scraped') {
      waiting.get(m.id)?.({ contentType: m.contentType, body: m.body });
    } else if (m.plinth === 'backup') {
      metrics.backupLast.set(m.seconds);
    }
  });
  // The primary gone (killed): drain and exit as at a SIGTERM, rather than serve on without it.
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  metrics.clusterScrape = () =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => done(null), SCRAPE_TIMEOUT_MS);
      const done = (r: { contentType: string; body: string } | null) => {
        clearTimeout(timer);
        waiting.delete(id);
        if (r === null) reject(new Error('the primary process did not answer the scrape'));
        else resolve(r);
      };
      waiting.set(id, done);
      send({ plinth: 'scrape', id });
    });
}

/** Tell the primary this process listens (process 1 hands it the start banner). */
export function reportReady(banner: string[] | null): void {
  send({ plinth: 'ready', banner });
}

function send(m: ClusterMessage): void {
  if (process.send && process.connected) process.send(m);
}
