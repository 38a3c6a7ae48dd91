#!/usr/bin/env bash
# Refuses an #include that points up the layers, as DESIGN.md draws them
# ("Arrows point down only"), and the store's internal headers outside the store.
#
# A source under src/DIR/ may include a header of its own directory, the public
# include/sluice.h, system headers, and headers of directories on a lower layer
# (the table below). A directory on the same layer as another is its sibling,
# not its base: the faces include nothing of each other. Includes are read by
# their path under src/ ("proto/resp.h"), or resolved when they climb ("../").
#
# The store's headers (src/store/*.h) describe its layout and locking: nothing
# outside src/store/ includes them, except that tests/ and bench/ may include
# the store's debug header (a name with "debug" in it), which exists for them.
#
# Usage: scripts/check-layers.sh [ROOT]   (run by `make test`; exits 1 on a refusal)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# The layers, bottom up (DESIGN.md's "The layers, bottom up", with the shared
# pieces of src/common/ under the algorithms and the commands that sluiced and
# the module share between the protocols and the server). The simulator
# (src/sim/: traffic generators, the run of one algorithm in virtual time,
# its SVG plot) serves the CLI's `simulate` and sluiced's live page (GET
# /v1/simulate): it needs only the algorithms, and sits just above the store,
# under the protocols (which decode a simulation's request), the server and
# the faces, which use it.
declare -A layer=(
  [common]=0
  [algo]=1
  [store]=2
  [sim]=3
  [policy]=4
  [backend]=5
  [proto]=6
  [cmd]=7
  [server]=8
  [cli]=9 [redis_module]=9 [client]=9
)
layer_name=(common algorithms store simulator policies backends protocols commands server faces)

refused=0
refuse() { # FILE LINE INCLUDE WHY
  printf '%s:%s: #include "%s" refused: %s\n' "$1" "$2" "$3" "$4"
  refused=$((refused + 1))
}

# The src/ directory an include lands in, or "" when it is not under src/:
# "proto/resp.h" from anywhere, or a path climbing from the including file.
target_dir() { # FILE INCLUDE
  local file=$1 inc=$2 path
  if [[ $inc == */* && $inc != ../* && $inc != ./* ]]; then
    path=src/$inc
    [[ -e $path ]] || return 0
  else
    path=$(realpath -m --relative-to=. "$(dirname "$file")/$inc")
  fi
  if [[ $path == src/*/* ]]; then
    path=${path#src/}
    printf '%s' "${path%%/*}"
  fi
}

check_file() { # FILE: every quoted include in it
  local file=$1 dir="" n inc to
  if [[ $file == src/*/* ]]; then
    dir=${file#src/}
    dir=${dir%%/*}
  fi
  while IFS=: read -r n inc; do
    inc=${inc#*\"}
    inc=${inc%%\"*}
    to=$(target_dir "$file" "$inc")
    [[ -n $to ]] || continue
    # The store's internals.
    if [[ $to == store && $dir != store && $inc == *.h ]]; then
      if [[ -n $dir || $(basename "$inc") != *debug* ]]; then
        refuse "$file" "$n" "$inc" "src/store/'s headers are the store's own layout; outside src/store/ use sluice.h (tests and bench: the store's debug header)"
        continue
      fi
    fi
    [[ -n $dir && $to != "$dir" ]] || continue
    if [[ -z ${layer[$dir]+x} ]]; then
      refuse "$file" "$n" "$inc" "src/$dir/ is in no layer: add it to the table in $0"
    elif [[ -z ${layer[$to]+x} ]]; then
      refuse "$file" "$n" "$inc" "src/$to/ is in no layer: add it to the table in $0"
    elif ((layer[$to] > layer[$dir])); then
      refuse "$file" "$n" "$inc" "$dir (${layer_name[${layer[$dir]}]}) may not include $to (${layer_name[${layer[$to]}]}, a higher layer)"
    elif ((layer[$to] == layer[$dir])); then
      refuse "$file" "$n" "$inc" "$dir and $to are siblings (${layer_name[${layer[$dir]}]}): neither includes the other"
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
}

files=0
while IFS= read -r -d '' f; do
  check_file "$f"
  files=$((files + 1))
done < <(find src tests bench -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)

if ((refused)); then
  echo "check-layers: $refused include(s) refused in $files files (the layers: $0, DESIGN.md)"
  exit 1
fi
echo "check-layers: $files files, every include points down the layers"
