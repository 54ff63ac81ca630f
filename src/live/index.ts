/**
 * Live queries, broadcast and presence over WebSocket (docs/api/live.md): the area.
 * routes.ts holds the routes, service.ts the engine of one instance, socket.ts one
 * socket's protocol, realtime/ Supabase Realtime's protocol on the same engine.
 *
 * Area objects are shared by every service in a process (tests run two instances side by
 * side), so each app gets its own LiveService, decorated as `app.live`, and closes it in its
 * own hooks: preClose sends 1012 to every socket, onClose stops the heartbeat, removes this
 * instance's presence (announcing presence_leave) and stops listening.
 */
import type { Area } from '../core/area.ts';
import { registerLiveRoutes } from './routes.ts';
import { LiveService } from './service.ts';

export const liveArea: Area = {
  name: 'live',
  async register(app, deps) {
    const svc = new LiveService(deps);
    app.decorate('live', svc);
    await registerLiveRoutes(app, svc, deps);
    app.addHook('onReady', async () => {
      await svc.start();
    });
    app.addHook('onClose', async () => {
      await svc.close();
    });
  },
};

declare module 'fastify' {
  interface FastifyInstance {
    live?: LiveService;
  }
}
