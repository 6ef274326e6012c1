#!/usr/bin/env bash
# Compiler launcher (CXX_COMPILER_LAUNCHER of every folder library, src/CMakeLists.txt): runs
# the compile, then, for a translation unit built with wider instruction-set flags
# (*_avx2.cpp, *_avx512.cpp), gives every inline or template function it emits a name of its
# own: `foo` becomes `foo.tfm_avx512`.
#
# Why: an inline function or template instantiation (std::vector<float>::resize, a helper in
# a shared header) is emitted as a weak COMDAT copy by every translation unit that uses it, and
# the linker keeps ONE copy for all callers. If it keeps the copy compiled with -mavx512f, the
# baseline callers run AVX-512 instructions and an AVX2-only CPU dies with SIGILL; which copy
# is kept depends on link order and on what the compiler chose to inline, so a Release build
# can pass by luck while a sanitizer build crashes. Renaming the copies of an ISA unit (the
# functions, and the COMDAT groups that hold their code) keeps them private to the units
# compiled with the same flags, whatever the compiler inlines. Data (vtables, typeinfo, static
# locals) keeps its name, so it stays one object shared by all.
# tests/isa/check_isa_symbols.sh checks the built objects; docs/design.md explains.
set -euo pipefail
"$@"
out=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  prev=$a
done
case "$out" in
  *_avx512.cpp.o) tag=avx512 ;;
  *_avx2.cpp.o) tag=avx2 ;;
  *) exit 0 ;;
esac
map="$out.isa-rename"
# shellcheck source=isa_code_symbols.sh
source "$(dirname "$0")/isa_code_symbols.sh"
isa_code_symbols "$out" | awk -v tag="$tag" 'NF { print $1 " " $1 ".tfm_" tag }' > "$map"
if [ -s "$map" ]; then objcopy --redefine-syms="$map" "$out"; fi
rm -f "$map"
