#!/bin/sh
# Usage: check_exports.sh NM LIBHTR — fails if libhtr defines a dynamic
# symbol that is not htr_* (everything else must stay hidden).
nm="$1"; lib="$2"
bad=$("$nm" -D --defined-only "$lib" | awk '{print $NF}' | grep -v '^htr_' | grep -v '^_init$' | grep -v '^_fini$')
if [ -n "$bad" ]; then
  echo "non-htr symbols exported by $lib:"; echo "$bad"; exit 1
fi
count=$("$nm" -D --defined-only "$lib" | awk '{print $NF}' | grep -c '^htr_')
echo "$count htr_* symbols exported"
[ "$count" -gt 50 ]
