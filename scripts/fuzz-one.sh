#!/usr/bin/env bash
# Runs one libFuzzer target of build/fuzz for FUZZ_SECONDS from its seeds in
# tests/fuzz/corpus/NAME; what it learns goes to build/fuzz/corpus/NAME. A crash,
# leak or failed check prints the log's tail and exits 1, leaving the input in
# build/fuzz/ (replay: build/fuzz/fuzz_NAME FILE). `make fuzz` runs the targets
# through this script, as many at once as there are cores.
# Usage: scripts/fuzz-one.sh tests/fuzz/fuzz_NAME.c
set -uo pipefail
name=$(basename "$1" .c)
t=${name#fuzz_}
mkdir -p "build/fuzz/corpus/$t" "tests/fuzz/corpus/$t"
if ! "build/fuzz/$name" -max_total_time="${FUZZ_SECONDS:-30}" -max_len="${FUZZ_MAX_LEN:-4096}" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build/fuzz/ \
    "build/fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"build/fuzz/$name.log" 2>&1; then
  tail -n 40 "build/fuzz/$name.log"
  echo "fuzz: $name FAILED (log: build/fuzz/$name.log)"
  exit 1
fi
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "build/fuzz/$name.log")
added=$(sed -n 's/^stat::new_units_added: *//p' "build/fuzz/$name.log")
echo "fuzz: $name for ${FUZZ_SECONDS:-30}s: $runs runs, $added new units"
