#!/usr/bin/env bash
# Make sure the local PostgreSQL the tests use answers; start it if it is installed but down.
# Where no server can be started, the test suite starts a throwaway one from the binaries
# (tests/pg.py) and only skips PostgreSQL tests, loudly, when neither is possible.
set -u
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "services: PostgreSQL on 127.0.0.1:5432 is down; starting it"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
fi
if command -v redis-cli >/dev/null 2>&1 && ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  if command -v redis-server >/dev/null 2>&1; then
    echo "services: Redis on 127.0.0.1:6379 is down; starting it"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  fi
fi
# RabbitMQ on 127.0.0.1:5672 (the broker contract tests use it, each under a queue prefix of
# its own; tests that restart or wipe a broker start a private node instead).
if command -v rabbitmq-server >/dev/null 2>&1 && ! (echo >/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  echo "services: RabbitMQ on 127.0.0.1:5672 is down; starting it"
  rabbitmq-server -detached >/dev/null 2>&1 || true
  for _ in $(seq 1 60); do (echo >/dev/tcp/127.0.0.1/5672) 2>/dev/null && break; sleep 1; done
fi
# etcd and ZooKeeper: the tests start private servers from these binaries (tests/coord_servers.py).
missing=()
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || missing+=(zookeeper)
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "services: installing ${missing[*]}"
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${missing[@]}" >/dev/null 2>&1; } \
    || echo "services: could not install ${missing[*]}"
fi
# The dashboard's browser tests drive the system Chromium (never a downloaded browser build).
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  echo "services: installing chromium for the dashboard's browser tests"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
    || echo "services: could not install chromium; the browser tests will fail"
fi
exit 0
