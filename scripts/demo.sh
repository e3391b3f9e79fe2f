#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job, end to end on this machine: a local nats-server with
# JetStream, two `ibus run` subscribers sharing one SQLite file with the
# audit and flaky example plugins, events published with duplicates (and a
# few malformed messages), one subscriber stopped with SIGTERM mid-way and
# started again; then a summary, and a check from the side-effect log that
# every unique event was handled exactly once by each handler.
#
# Everything runs on 127.0.0.1 in a temporary directory and is stopped on
# exit, also on Ctrl-C. Set IB_DEMO_KEEP=1 to keep the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash scripts/deps.sh
bdir=${IB_DEMO_BUILD:-build}
echo "== building in $bdir"
cmake -S . -B "$bdir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$bdir" -j "$(nproc)" --target ibus ib_plugin_audit ib_plugin_flaky >/dev/null

ibus=$root/$bdir/plugin/cli/ibus
plugins=$root/$bdir/plugin/examples
work=$(mktemp -d "${TMPDIR:-/tmp}/ibus-demo.XXXXXX")
pids=()

cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "${IB_DEMO_KEEP:-0}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== starting nats-server (JetStream) on a free loopback port"
mkdir -p "$work/js"
nats-server -js -a 127.0.0.1 -p -1 -sd "$work/js" --ports_file_dir "$work" >"$work/nats.log" 2>&1 &
nats_pid=$!
pids+=("$nats_pid")
for _ in $(seq 100); do
  ports=$(ls "$work"/*.ports 2>/dev/null | head -n 1 || true)
  [ -n "$ports" ] && break
  sleep 0.1
done
[ -n "${ports:-}" ] || { echo "nats-server did not start"; cat "$work/nats.log"; exit 1; }
port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nats"][0].rsplit(":",1)[1])' "$ports")
url="nats://127.0.0.1:$port"
echo "   $url (pid $nats_pid)"

effects=$work/side-effects.log
run_args=(
  run --nats-url "$url" --stream ORDERS --stream-subjects 'orders.>' --durable demo
  --recorder "sqlite:$work/processed.db"
  --plugin "$plugins/audit.so" --plugin "$plugins/flaky.so"
  --plugin-config "audit=file=$effects"
  --plugin-config "flaky=fraction=0.2,file=$effects"
  --retry-delay 300ms --max-deliver 5 --batch 64
  --summary-file "$work/summary.jsonl" --log-format text --idle-exit 4s
)

started=""
start_subscriber() { # name, extra args...; sets $started to the pid
  local name=$1
  shift
  "$ibus" "${run_args[@]}" "$@" >>"$work/$name.log" 2>&1 &
  started=$!
  pids+=("$started")
}

echo "== two subscribers sharing $work/processed.db"
start_subscriber sub-a --create
a=$started
for _ in $(seq 100); do grep -q "running" "$work/sub-a.log" 2>/dev/null && break; sleep 0.1; done
grep -q "running" "$work/sub-a.log" || { echo "subscriber a did not start"; cat "$work/sub-a.log"; exit 1; }
start_subscriber sub-b
b=$started
echo "   a: pid $a, b: pid $b"

publish() { # ids-file, type, count
  "$ibus" publish --nats-url "$url" --prefix orders --type "$2" --count "$3" --duplicates 0.2 \
    --seed "$RANDOM" --ids-file "$1" >>"$work/published.txt"
}

echo "== publishing 3000 events with 20% duplicates (phase 1)"
publish "$work/ids-1" order.created 2000
publish "$work/ids-2" order.paid 1000
"$ibus" publish --nats-url "$url" --raw --subject orders.garbage 'not a protobuf Event' \
  >>"$work/published.txt"

sleep 0.5
echo "== SIGTERM to subscriber a mid-stream"
kill -TERM "$a"
set +e
wait "$a"
a_exit=$?
set -e
echo "   a exited with status $a_exit (0 = clean drain)"

echo "== publishing 2000 more events while a is down (phase 2)"
publish "$work/ids-3" payment.settled 2000

echo "== restarting subscriber a"
start_subscriber sub-a2
a2=$started
echo "   a: pid $a2"

echo "== waiting for both subscribers to go idle"
for p in "$b" "$a2"; do wait "$p" || true; done
pids=("$nats_pid")

python3 - "$work" "$a_exit" <<'PY'
import json, sys, collections, os
work, a_exit = sys.argv[1], int(sys.argv[2])
ids = []
for f in ("ids-1", "ids-2", "ids-3"):
    ids += open(os.path.join(work, f)).read().split()
unique = set(ids)
totals = collections.Counter()
for line in open(os.path.join(work, "summary.jsonl")):
    totals.update({k: v for k, v in json.loads(line).items() if isinstance(v, int) and k not in ("pid", "exit")})
pairs = collections.Counter()
for line in open(os.path.join(work, "side-effects.log")):
    consumer, event_id, _type = line.split()
    pairs[(consumer, event_id)] += 1
consumers = sorted({c for c, _ in pairs})
repeats = sum(n - 1 for n in pairs.values() if n > 1)
missing = {c: len(unique - {i for cc, i in pairs if cc == c}) for c in consumers}
published = 0
for line in open(os.path.join(work, "published.txt")):
    published += int(dict(kv.split("=") for kv in line.split())["published"])
print()
print("== summary")
print(f"  messages published               {published} (with duplicates and 1 malformed)")
print(f"  unique events published          {len(unique)}")
print(f"  messages received                {totals['received']}")
print(f"  handler runs (side effects)      {totals['handled']}")
print(f"  duplicates dropped               {totals['duplicates']}")
print(f"  handler retries (flaky)          {totals['retried']}")
print(f"  dead-lettered                    {totals['dead_lettered']}")
print(f"  subscriber a drained with status {a_exit}")
for c in consumers:
    n = sum(1 for cc, _ in pairs if cc == c)
    print(f"  {c:<32} {n} events, {missing[c]} missing")
ok = a_exit == 0 and repeats == 0 and len(consumers) == 2 and all(v == 0 for v in missing.values())
print()
print("exactly once per handler: " + ("yes" if ok else f"NO ({repeats} repeated side effects)"))
sys.exit(0 if ok else 1)
PY
