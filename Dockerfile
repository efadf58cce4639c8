# syntax=docker/dockerfile:1
#
# One image for every service: SERVICES picks what a container runs
# (e.g. SERVICES=gateway,partners or SERVICES=dispatch). See docs/OPERATIONS.md.
#
#   docker build -t ride-platform .
#   docker run --rm -p 3000:3000 ride-platform      # all-in-one, embedded database
#
# CI builds and runs it with podman (scripts/container-check.sh), from base
# images it makes itself under NODE_IMAGE's default name.
ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: compile TypeScript to dist/ -------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the pinned `node` devDependency would download a second Node; the image has one.
RUN npm ci --ignore-scripts --no-audit --no-fund
# The whole context (.dockerignore keeps out tests, docs, data, secrets):
# tsconfig.build.json decides what is compiled, so new code folders need no edit here.
COPY . .
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
# Code and dependencies stay root-owned: the process cannot rewrite what it runs.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# ./data is where the embedded database lives when DATABASE_URL is unset (trying it out).
RUN mkdir -p /app/data && chown 1000:1000 /app/data
# The image's `node` user, by number so Kubernetes can verify runAsNonRoot.
USER 1000:1000
# 3000: gateway API (when SERVICES includes gateway), 3030: Prometheus metrics, 8080: /health/live, /health/ready
EXPOSE 3000 3030 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
	CMD ["node", "dist/bin/healthcheck.js", "ready"]
# Exec form: Node is PID 1 and gets SIGTERM itself (no shell in between) and
# shuts down gracefully (runtime/shutdown.ts).
CMD ["node", "dist/bin/server.js"]
