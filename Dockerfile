# Cloudly control plane. Build: docker build -t cloudly .
# Run with TLS (docs/tls.md): docker run -p 3000:3000 -v cloudly-data:/data -v /etc/cloudly/tls:/tls:ro \
#   -e CLOUDLY_TLS_CERT_FILE=/tls/fullchain.pem -e CLOUDLY_TLS_KEY_FILE=/tls/privkey.pem cloudly
# Or by ACME (HTTP-01 answered on 8080 inside; the unprivileged user cannot bind 80):
#   docker run -p 443:3000 -p 80:8080 -v cloudly-data:/data -e CLOUDLY_ACME_DOMAINS=cloudly.example.com \
#   -e CLOUDLY_ACME_EMAIL=ops@example.com -e CLOUDLY_ACME_HTTP_PORT=8080 cloudly
# Without a certificate it serves plain HTTP on 0.0.0.0 and warns at start, unless CLOUDLY_ALLOW_PLAIN_HTTP=1
# says a proxy in front terminates TLS.
# (Not built in the development environment, which has no Docker: untested.)

# ---- build: install everything, transpile ts/ to dist/, then drop the dev dependencies.
FROM node:20-slim AS build
WORKDIR /app
ENV MONGOMS_DISABLE_POSTINSTALL=1
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts ./scripts
COPY ts ./ts
COPY web ./web
# The dashboard bundle goes to dist/dashboard after the server build (which clears dist/); the
# run stage has no web/, so /dashboard serves this prebuilt bundle as it is.
RUN npm run build && npm run build:dashboard && npm prune --omit=dev --no-audit --no-fund

# ---- run: plain node on the transpiled files (no TypeScript loader in the process).
FROM node:20-slim

# tini reaps zombies and forwards SIGTERM, so Cloudly's graceful stop runs on `docker stop`.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# MALLOC_*: the allocator settings measured with bench/closure.bench.ts (productionAllocatorEnv in
# scripts/build.ts; keep the two in step): peak RSS during a 1 GiB closure transfer under 200 MB.
ENV NODE_ENV=production \
    MONGOMS_DISABLE_POSTINSTALL=1 \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    CLOUDLY_HOST=0.0.0.0 \
    CLOUDLY_PORT=3000 \
    CLOUDLY_DATA_DIR=/data

COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The launcher (mode 755 in git; COPY keeps it).
COPY bin/cloudly-server ./bin/cloudly-server

RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 3000

# /livez over https once a certificate is given or ordered. Loopback and no credentials: the certificate names
# the server's public names, not 127.0.0.1, so it is not verified here.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "require(process.env.CLOUDLY_TLS_CERT_FILE || process.env.CLOUDLY_ACME_DOMAINS ? 'node:https' : 'node:http').get({ host: '127.0.0.1', port: process.env.CLOUDLY_PORT || 3000, path: '/livez', rejectUnauthorized: false }, (r) => process.exit(r.statusCode === 200 ? 0 : 1)).on('error', () => process.exit(1))"]

ENTRYPOINT ["/usr/bin/tini", "--"]
# The launcher passes the server's node flags and execs node on dist/cli.js (npm run start:prod).
CMD ["/app/bin/cloudly-server"]
