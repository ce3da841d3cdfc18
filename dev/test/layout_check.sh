#!/usr/bin/env bash
# The layout rules the tests and scripts rely on:
#  1. every shell check is named NAME_check.sh (dev/test/, dev/test/gpu/): dev/test/run_all.sh runs
#     dev/test/*_check.sh and nothing else, so a check named otherwise would never run. The helpers that
#     are not checks are listed below.
#  2. dev/test/gpu/run_all.sh runs every dev/test/gpu/*_check.sh, and each check it names exists.
#  3. step lines are read by dev/steplog.py alone: no other script or check matches them itself.
#  4. host tools link only what they call (build/host/libllmc.a): gpt2tok holds no NCCL id exchange.
# Usage: dev/test/layout_check.sh   (exit 0 = pass)
set -uo pipefail
cd "$(dirname "$0")/../.."
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

helpers=" install_deps.sh run_host_tests.sh fake_launchers.sh run_all.sh "
for f in dev/test/*.sh dev/test/gpu/*.sh; do
    n=$(basename "$f")
    case "$n" in *_check.sh) continue;; esac
    case "$helpers" in *" $n "*) continue;; esac
    bad "$f: a check is named NAME_check.sh (run_all.sh runs no other); a helper belongs in layout_check.sh's list"
done

gpu_checks=" $(sed -nE 's/^ALL\+?="([^"]*)"$/\1/p' dev/test/gpu/run_all.sh | tr '\n' ' ') "
for f in dev/test/gpu/*_check.sh; do
    case "$gpu_checks" in *" $(basename "$f" .sh) "*) ;; *) bad "dev/test/gpu/run_all.sh does not run $f";; esac
done
for c in $gpu_checks; do
    [ -f "dev/test/gpu/$c.sh" ] || [ "$c" = zero_check ] || [ "$c" = kernel_lab ] ||
        bad "dev/test/gpu/run_all.sh names '$c', but there is no dev/test/gpu/$c.sh"
done

# grep / sed / re patterns anchored on "step" or spelling its padding: a parser of its own
hits=$(grep -rnE '\^step|\^\(step|step\\s|step \+' --include=*.sh --include=*.py dev scripts |
       grep -vE '^dev/steplog\.py:|^dev/test/steplog_check\.(sh|py):|^dev/test/layout_check\.sh:')
[ -z "$hits" ] || bad "step lines parsed outside dev/steplog.py (use it):"$'\n'"$hits"

if make -s gpt2tok > /dev/null; then
    syms=$(nm -C gpt2tok | grep -E 'id_exchange|peer_watch')
    [ -z "$syms" ] || bad "gpt2tok links the NCCL id exchange:"$'\n'"$(echo "$syms" | head -5)"
else
    bad "make gpt2tok failed"
fi

[ $fails -eq 0 ] && echo "layout_check: PASSED" || echo "layout_check: $fails failed"
[ $fails -eq 0 ]
