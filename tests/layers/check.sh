#!/bin/sh
# The layering the build promises (docs/architecture-layers.md), checked
# on the built files:
#
#   check.sh includes SRC            no #include under SRC/launcher names
#                                    transport/ or bootstrap/ (hvdrun
#                                    reaches the library through wire/ and
#                                    rdzv/ only); none under SRC climbs
#                                    with ../ (docs/style.md: by the path
#                                    from src/), but libhvd_nn's one of
#                                    ../wire/le.h
#   check.sh knobs SRC               the library reads HOROVOD_* variables
#                                    only through env.h's table (env.c),
#                                    which docs/environment.md is checked
#                                    against; hvdrun's own in launcher/
#   check.sh hvdrun HVDRUN OBJ...    hvdrun defines no symbol that the
#                                    objects above the base (OBJ: engine,
#                                    collectives, transports, bootstrap,
#                                    api, MPI) define, and uses no MPI
#   check.sh exports LIB LIST MPI    libhvd.so exports exactly the public
#                                    functions in LIST; hvd_init_comm
#                                    (hvd_mpi.h) only when MPI is ON
#   check.sh order OBJ...            src/engine calls one way: no engine
#                                    object uses a symbol that an engine
#                                    object on its line or above it in
#                                    $engine_order defines, and every engine
#                                    object has a line; no src/coll object
#                                    uses a symbol an engine object defines
#                                    (OBJ: libhvd's objects)
set -eu

# The engine's files, top to bottom (docs/architecture.md); the files on
# one line are peers, which do not call each other either.
engine_order='
engine
cycle
desync
negotiate rider
execute
device
device_nccl device_staged
pset tuning
core waits
autotune cache device_ready index message timeline
gp request
'

mode=$1
shift
fail() {
  echo "layers: $*" >&2
  exit 1
}

case $mode in
includes)
  bad=$(grep -rnE '#include *"(\.\./)*(transport|bootstrap)/' "$1/launcher" || true)
  [ -z "$bad" ] || fail "src/launcher includes the library's insides:
$bad"
  bad=$(grep -rnE '#include *"\.\./' "$1" | grep -vE '^[^:]*/nn/[^:]*:[0-9]+:#include "\.\./wire/le\.h"' || true)
  [ -z "$bad" ] || fail "includes that climb with ../ (write the path from src/, docs/style.md):
$bad"
  ;;
knobs)
  bad=$(grep -rn 'getenv("HOROVOD_' "$1" --include='*.c' | grep -v -e "^$1/env.c:" -e "^$1/launcher/" || true)
  [ -z "$bad" ] || fail "HOROVOD_* read outside env.h's table:
$bad"
  ;;
hvdrun)
  exe=$1
  shift
  above=$(mktemp)
  mine=$(mktemp)
  trap 'rm -f "$above" "$mine"' EXIT
  nm --defined-only -g "$@" | awk 'NF == 3 { print $3 }' | sort -u >"$above"
  [ -s "$above" ] || fail "no symbols in the objects above the base: wrong arguments?"
  nm --defined-only "$exe" | awk 'NF == 3 { print $3 }' | sort -u >"$mine"
  both=$(comm -12 "$above" "$mine")
  [ -z "$both" ] || fail "hvdrun carries objects above the base: $(echo "$both" | head -20 | tr '\n' ' ')"
  mpi=$(nm "$exe" | grep -E ' (P?MPI_|ompi_|opal_)' || true)
  [ -z "$mpi" ] || fail "hvdrun uses MPI: $(echo "$mpi" | head -5 | tr '\n' ' ')"
  ;;
exports)
  got=$(nm -D --defined-only "$1" | awk '$2 == "T" && $3 ~ /^hvd_[a-z]/ { print $3 }' | sort)
  want=$(grep -v '^#' "$2" | sort)
  case ${3:-ON} in
  ON | on | 1 | TRUE | true) ;;
  *) want=$(echo "$want" | grep -vx 'hvd_init_comm') ;;
  esac
  if [ "$got" != "$want" ]; then
    echo "$want" >"${TMPDIR:-/tmp}/hvd-exports-want.$$"
    echo "$got" | diff "${TMPDIR:-/tmp}/hvd-exports-want.$$" - >&2 || true
    rm -f "${TMPDIR:-/tmp}/hvd-exports-want.$$"
    fail "libhvd.so's exported functions differ from $2 (< expected, > built)"
  fi
  ;;
order)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # level of each engine object, and what each object defines and uses
  echo "$engine_order" | awk 'NF { for (i = 1; i <= NF; i++) print $i, NR }' >"$tmp/level"
  objs=$(for obj in "$@"; do
    case $obj in */src/engine/*.o | */src/coll/*.o) echo "$obj" ;; esac
  done)
  [ -n "$objs" ] || fail "no engine or collective objects among the arguments"
  # "engine/cycle" from ".../src/engine/cycle.c.o: ..." (nm -A names the file)
  name='{ f = $1; sub(/^.*\/src\//, "", f); sub(/\.c\.o:.*$/, "", f); sub(/\.o:.*$/, "", f) }'
  # shellcheck disable=SC2086
  nm -A --defined-only -g $objs | awk "$name"' NF == 3 { print $3, f }' >"$tmp/defs"
  # shellcheck disable=SC2086
  nm -A -u $objs | awk "$name"' { print $NF, f }' >"$tmp/uses"
  unplaced=$(awk '$2 ~ /^engine\// { sub(/^engine\//, "", $2); print $2 }' "$tmp/defs" |
    sort -u | while read -r f; do grep -q "^$f " "$tmp/level" || echo "src/engine/$f.c"; done)
  [ -z "$unplaced" ] || fail "not in check.sh's engine_order (give each a line): $unplaced"
  bad=$(awk 'FNR == NR { level[$1] = $2; next }
             FILENAME ~ /defs$/ { owner[$1] = $2; next }
             { u = $2; d = owner[$1]
               if (d == "" || d == u) next
               if (u ~ /^coll\// && d ~ /^engine\//) { print u ".c uses " $1 " of " d ".c"; next }
               if (u !~ /^engine\// || d !~ /^engine\//) next
               lu = level[substr(u, 8)]; ld = level[substr(d, 8)]
               if (ld <= lu)
                 print u ".c uses " $1 " of " d ".c, " (ld < lu ? "above" : "beside") " it" }' \
    "$tmp/level" "$tmp/defs" "$tmp/uses" | sort -u)
  [ -z "$bad" ] || fail "a call against the order ($(echo "$engine_order" | awk 'NF' |
    paste -sd '>' | sed 's/>/ > /g')):
$bad"
  ;;
*)
  fail "unknown check '$mode'"
  ;;
esac
echo "layers: $mode ok"
