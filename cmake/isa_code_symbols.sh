# Sourced by cmake/isa_private_symbols.sh and tests/isa/check_isa_symbols.sh: the names in an
# object file that could hand its code to units built with other flags — its weak (inline or
# template) functions, and the signatures of the COMDAT groups that hold code (a constructor's
# group is named C5 and holds the C1/C2 aliases).
isa_code_symbols() {
  {
    readelf -sW "$1" | awk '$4 == "FUNC" && $5 == "WEAK" && $7 != "UND" { print $8 }'
    readelf -gW "$1" | awk '
      /^COMDAT group section/ { sig = $0; sub(/^[^]]*\] `\.group'"'"' \[/, "", sig); sub(/\] contains.*/, "", sig); next }
      sig != "" { for (i = 1; i <= NF; ++i) if ($i ~ /^\.text/) { print sig; sig = ""; break } }'
  } | sort -u
}
