#!/usr/bin/env bash
# Every translation unit compiled with wider instruction-set flags (*_avx2.cpp, *_avx512.cpp)
# must keep its inline and template functions to itself (cmake/isa_private_symbols.sh): no
# weak function, and no COMDAT group holding code, under a name a baseline unit could also
# define. A unit that escaped the renaming (a new library without the launcher, a compiler
# that names things differently) fails here, on any CPU, before an AVX2-only machine meets
# the AVX-512 copy as SIGILL.
#   usage: check_isa_symbols.sh BUILD_DIR
set -euo pipefail
# shellcheck source=../../cmake/isa_code_symbols.sh
source "$(dirname "$0")/../../cmake/isa_code_symbols.sh"
build=$1
mapfile -t objs < <(find "$build" -name '*_avx2.cpp.o' -o -name '*_avx512.cpp.o' | sort)
[ "${#objs[@]}" -gt 0 ] || { echo "FAIL: no *_avx2.cpp.o / *_avx512.cpp.o objects under $build"; exit 1; }
bad=0 renamed=0
for o in "${objs[@]}"; do
  case "$o" in *_avx512.cpp.o) tag=avx512 ;; *) tag=avx2 ;; esac
  leaks=$(isa_code_symbols "$o")
  n=$(printf '%s\n' "$leaks" | grep -c . || true)
  ok=$(printf '%s\n' "$leaks" | grep -c "\.tfm_$tag\$" || true)
  renamed=$((renamed + ok))
  if [ "$n" != "$ok" ]; then
    echo "FAIL: $o shares $((n - ok)) inline/template function(s) with units built for other instruction sets:"
    printf '%s\n' "$leaks" | grep -v "\.tfm_$tag\$" | head -5 | c++filt | sed 's/^/    /'
    bad=$((bad + 1))
  fi
done
echo "${#objs[@]} ISA objects checked, $renamed private inline/template functions, $bad leaking"
[ "$bad" -eq 0 ]
