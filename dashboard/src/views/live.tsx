/** Live: the registered live queries and presence per channel, as the database holds them for every instance. */
import { useEffect } from 'preact/hooks';
import { get } from '../api.ts';
import { DataTable, ErrorLine, useLoad } from '../ui.tsx';

interface LiveRegistry {
  queries: { query_id: string; query: string; mode: string; registered_by: string; seq: number; registered_at: string }[];
  presence: { channel: string; clients: number }[];
  /** WebSocket clients on the instance that answered, per query id or channel. */
  sockets: Record<string, number>;
}

export function LiveView() {
  const live = useLoad(() => get<LiveRegistry>('/api/live'));
  useEffect(() => {
    const t = setInterval(live.reload, 3000);
    return () => clearInterval(t);
  }, []);
  return (
    <section aria-labelledby="live-title">
      <h2 id="live-title">Live</h2>
      <p>Refreshed every 3 seconds.</p>
      <ErrorLine error={live.error} />
      {live.data && (
        <>
          <DataTable
            caption="Live queries"
            rows={live.data.queries.map((q) => ({ query_id: q.query_id, subscribers: live.data!.sockets[q.query_id] ?? 0, mode: q.mode, seq: q.seq, query: q.query, registered_by: q.registered_by, registered_at: q.registered_at }))}
          />
          <DataTable
            caption="Open sockets on this instance, per query or channel"
            rows={Object.entries(live.data.sockets).map(([channel, sockets]) => ({ channel, sockets }))}
          />
          <DataTable caption="Presence per channel" rows={live.data.presence} />
        </>
      )}
    </section>
  );
}
