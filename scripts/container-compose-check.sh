# shellcheck shell=bash
# Check 4 of scripts/container-check.sh (sourced there; uses its WORK, IMAGE,
# DEBIAN_BASE, RUN_ID, free_port, smoke, whsec, show_logs):
# docker-compose.yml, unchanged, brought up by Debian's docker-compose 1.29
# against `podman system service`. No registry: the file's `nats`,
# `postgres` and `redis` images are local stand-ins built from Debian packages
# under the same names. Podman never schedules HEALTHCHECKs without systemd, so a loop
# runs them while the project is up (depends_on waits on them).

NATS_STANDIN=docker.io/library/nats:2.10-alpine
POSTGRES_STANDIN=docker.io/library/postgres:17-alpine
REDIS_STANDIN=docker.io/library/redis:7-alpine

build_standins() {
	local ctx=$WORK/base/standins
	mkdir -p "$ctx"
	if ! podman image exists "$NATS_STANDIN"; then
		# nats-server plus wget for the file's healthcheck; the file gives the arguments.
		cat >"$ctx/nats.Containerfile" <<EOF
FROM $DEBIAN_BASE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nats-server wget >/dev/null && rm -rf /var/lib/apt/lists/*
EXPOSE 4222 8222
ENTRYPOINT ["nats-server"]
EOF
		podman build --quiet --pull=never --network host --format docker -t "$NATS_STANDIN" -f "$ctx/nats.Containerfile" "$ctx" >/dev/null 2>>"$WORK/podman.log" || return 1
	fi
	if ! podman image exists "$POSTGRES_STANDIN"; then
		# What the official image's entrypoint does with POSTGRES_USER/DB/PASSWORD, for an empty data directory.
		cat >"$ctx/postgres-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
PGDATA=/var/lib/postgresql/data
mkdir -p "$PGDATA" /var/run/postgresql && chown -R postgres:postgres "$PGDATA" /var/run/postgresql && chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	printf '%s\n' "$POSTGRES_PASSWORD" >/tmp/pwfile && chown postgres /tmp/pwfile
	runuser -u postgres -- initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/tmp/pwfile --auth-local=trust --auth-host=scram-sha-256 >/dev/null
	rm -f /tmp/pwfile
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	runuser -u postgres -- postgres -D "$PGDATA" -c listen_addresses='' &
	until runuser -u postgres -- pg_isready -q -U "$POSTGRES_USER" -d postgres; do sleep 0.2; done
	[ "$POSTGRES_DB" = postgres ] || runuser -u postgres -- psql -q -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\""
	runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec runuser -u postgres -- postgres -D "$PGDATA" -c listen_addresses='*'
EOF
		cat >"$ctx/postgres.Containerfile" <<EOF
FROM $DEBIAN_BASE
RUN mkdir -p /etc/postgresql-common && echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.conf \
 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 >/dev/null && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/lib/postgresql/15/bin:\$PATH
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
RUN chmod 755 /usr/local/bin/postgres-entrypoint.sh
STOPSIGNAL SIGINT
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
EOF
		podman build --quiet --pull=never --network host --format docker -t "$POSTGRES_STANDIN" -f "$ctx/postgres.Containerfile" "$ctx" >/dev/null 2>>"$WORK/podman.log" || return 1
	fi
	if ! podman image exists "$REDIS_STANDIN"; then
		# redis-server and redis-cli (the file's healthcheck); the file gives the command and the user (999, the image's redis); /data is its working directory.
		cat >"$ctx/redis.Containerfile" <<EOF
FROM $DEBIAN_BASE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null && rm -rf /var/lib/apt/lists/* \\
 && mkdir -p /data && chown 999:999 /data
WORKDIR /data
EXPOSE 6379
EOF
		podman build --quiet --pull=never --network host --format docker -t "$REDIS_STANDIN" -f "$ctx/redis.Containerfile" "$ctx" >/dev/null 2>>"$WORK/podman.log" || return 1
	fi
}

check4() {
	local t0 sock port key pw redispw status unhealthy counted
	command -v docker-compose >/dev/null 2>&1 || { echo "docker-compose is not installed"; return 1; }
	t0=$(date +%s)
	build_standins || { echo "cannot build the stand-in nats/postgres/redis images"; return 1; }
	echo "stand-in nats, postgres and redis images ready ($(seconds_since "$t0") s)"

	sock=$WORK/podman-$RUN_ID.sock
	podman system service --time=0 "unix://$sock" >"$WORK/service.log" 2>&1 &
	service_pid=$!
	for _ in $(seq 1 50); do [ -S "$sock" ] && break; sleep 0.1; done
	port=$(free_port) key="ck_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" pw=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
	# The bus passwords, one per user: the stand-in nats-server gets the file's config (k8s/infra/nats-compose.conf), which requires them.
	for u in GATEWAY PRICING RIDERS ORDERS DISPATCH NOTIFICATIONS FLEET OPERATOR; do
		export "NATS_PASSWORD_$u=p$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	done
	# Redis's password: the file's redis requires it, the gateway's REDIS_URL carries it.
	redispw=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
	local compose=(docker-compose --project-name "$RUN_ID" --file "$ROOT/docker-compose.yml")
	export DOCKER_HOST=unix://$sock COMPOSE_HTTP_TIMEOUT=300 RIDE_IMAGE=$IMAGE POSTGRES_PASSWORD=$pw REDIS_PASSWORD=$redispw GATEWAY_PORT=127.0.0.1:$port \
		BOOTSTRAP_PARTNER_KEY=$key BOOTSTRAP_WEBHOOK_SECRET=$(whsec) ALLOW_BOOTSTRAP_PARTNER=true WEBHOOK_ALLOW_PRIVATE=true WEBHOOK_PORTS=9 NAMESPACE=$RUN_ID \
		COMPOSE_PROFILES=sandbox FLEET_MODE=simulated
	# The file runs live mode by default; the sandbox profile (the simulated fleet) is on here so every container of the file is checked.

	# The health check scheduler podman lacks here.
	compose_pid_file=$WORK/health-loop-$RUN_ID.pid
	(
		while :; do
			podman ps -q --filter "label=com.docker.compose.project=$RUN_ID" | xargs -r -n1 podman healthcheck run >/dev/null 2>&1
			sleep 2
		done
	) &
	echo $! >"$compose_pid_file"

	status=0
	"${compose[@]}" up -d --no-build >"$WORK/compose-up.log" 2>&1 || { tail -n 20 "$WORK/compose-up.log"; status=1; }
	if [ "$status" = 0 ]; then
		smoke ready "http://127.0.0.1:$port/health/ready" 120 || status=1
	fi
	if [ "$status" = 0 ]; then
		for _ in $(seq 1 30); do
			unhealthy=$(podman ps --filter "label=com.docker.compose.project=$RUN_ID" --format '{{.Names}} {{.Status}}' | grep -v '(healthy)' | grep -v -- '-migrate-' || true)
			[ -z "$unhealthy" ] && break
			sleep 2
		done
		if [ -n "$unhealthy" ]; then echo "not healthy: $unhealthy"; status=1; else echo "all containers healthy: $(podman ps -q --filter "label=com.docker.compose.project=$RUN_ID" | wc -l)"; fi
	fi
	if [ "$status" = 0 ]; then
		# The webhook target is inside the gateway's own container: nothing leaves the machine.
		smoke book "http://127.0.0.1:$port" "$key" "http://127.0.0.1:9/hooks/rides" || status=1
	fi
	if [ "$status" = 0 ]; then
		# The calls above were counted in the file's Redis (keys ride:<NAMESPACE>:…), not in the gateway's memory.
		counted=$("${compose[@]}" exec -T redis sh -c 'REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli --scan --pattern "ride:*" | head -n 3' 2>&1)
		if printf '%s\n' "$counted" | grep -q "^ride:$RUN_ID:"; then echo "the gateway counts its limits in redis: $(printf '%s\n' "$counted" | head -n 1)"; else echo "no limit keys in redis: $counted"; status=1; fi
	fi
	if [ "$status" != 0 ]; then
		for name in gateway orders migrate postgres nats redis; do echo "--- $name"; "${compose[@]}" logs --no-color --tail 15 "$name" 2>&1; done
	fi
	"${compose[@]}" down --volumes --timeout 30 >"$WORK/compose-down.log" 2>&1 || { echo "docker-compose down failed"; status=1; }
	kill "$(cat "$compose_pid_file")" 2>/dev/null
	kill "$service_pid" 2>/dev/null
	wait "$service_pid" 2>/dev/null
	service_pid=
	rm -f "$sock" "$compose_pid_file"
	unset NATS_PASSWORD_GATEWAY NATS_PASSWORD_PRICING NATS_PASSWORD_RIDERS NATS_PASSWORD_ORDERS NATS_PASSWORD_DISPATCH NATS_PASSWORD_NOTIFICATIONS NATS_PASSWORD_FLEET NATS_PASSWORD_OPERATOR
	unset DOCKER_HOST RIDE_IMAGE POSTGRES_PASSWORD REDIS_PASSWORD GATEWAY_PORT BOOTSTRAP_PARTNER_KEY BOOTSTRAP_WEBHOOK_SECRET ALLOW_BOOTSTRAP_PARTNER WEBHOOK_ALLOW_PRIVATE WEBHOOK_PORTS NAMESPACE \
		COMPOSE_PROFILES FLEET_MODE
	return "$status"
}
