# syntax=docker/dockerfile:1
#
# One image for every service: SERVICES picks what a container runs
# (e.g. SERVICES=gateway,partners or SERVICES=dispatch). See docs/OPERATIONS.md.
#
#   docker build -t ride-platform .
#   docker run --rm -p 3000:3000 ride-platform      # all-in-one, embedded database
#
ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: compile TypeScript to dist/ -------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the pinned `node` devDependency would download a second Node; the image has one.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json moleculer.config.ts ./
COPY bin ./bin
COPY lib ./lib
COPY mixins ./mixins
COPY runtime ./runtime
COPY services ./services
COPY scripts ./scripts
RUN node node_modules/typescript/bin/tsc -p tsconfig.build.json \
	&& node scripts/copy-build-assets.mjs

# --- deps: production dependencies only -------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
	&& npm cache clean --force

# --- runtime ------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
	PORT=3000 \
	METRICS_PORT=3030 \
	HEALTH_PORT=8080
WORKDIR /app
COPY --from=deps --chown=1000:1000 /app/node_modules ./node_modules
COPY --from=build --chown=1000:1000 /app/dist ./dist
COPY --chown=1000:1000 package.json ./
# ./data is where the embedded database lives when DATABASE_URL is unset (trying it out).
RUN mkdir -p /app/data && chown 1000:1000 /app/data
# The image's `node` user, by number so Kubernetes can verify runAsNonRoot.
USER 1000:1000
# 3000: gateway API (when SERVICES includes gateway), 3030: Prometheus metrics, 8080: /health/live, /health/ready
EXPOSE 3000 3030 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
	CMD ["node", "dist/bin/healthcheck.js", "ready"]
# Node as PID 1 gets SIGTERM directly and shuts down gracefully (runtime/shutdown.ts).
CMD ["node", "dist/bin/server.js"]
