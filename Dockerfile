# Cloudly control plane. Build: docker build -t cloudly .   Run: docker run -p 3000:3000 -v cloudly-data:/data cloudly
FROM node:20-slim

# tini reaps zombies and forwards SIGTERM, so Cloudly's graceful stop runs on `docker stop`.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*

WORKDIR /app
ENV NODE_ENV=production \
    MONGOMS_DISABLE_POSTINSTALL=1 \
    CLOUDLY_HOST=0.0.0.0 \
    CLOUDLY_PORT=3000 \
    CLOUDLY_DATA_DIR=/data

COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY tsconfig.json ./
COPY ts ./ts

RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 3000

HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.CLOUDLY_PORT || 3000) + '/livez').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "--import", "tsx", "ts/cli.ts"]
