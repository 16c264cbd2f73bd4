#!/bin/sh
# Usage: check_exports.sh NM PLUGIN.so... — each plugin must export exactly
# one defined dynamic symbol, htr_plugin_get_api.
nm="$1"
shift
status=0
for so in "$@"; do
  syms=$("$nm" -D --defined-only "$so" | awk '{print $NF}' | sort -u)
  if [ "$syms" != "htr_plugin_get_api" ]; then
    echo "FAIL $so exports:"
    echo "$syms"
    status=1
  else
    echo "ok   $so"
  fi
done
exit $status
