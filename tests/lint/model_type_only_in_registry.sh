#!/bin/bash
# One file per model family: no code outside the registry (src/models/family.cpp and
# src/models/families/) compares model_type with a string (docs/design.md, "Adding a model
# family"). Run from the source root.
set -euo pipefail
hits=$(grep -rnE "model_type *(==|!=) *[\"']|[\"'] *(==|!=) *[a-z_.]*model_type" src tools bench \
         --include=*.cpp --include=*.h --include=*.py | grep -v '^src/models/famil' || true)
if [ -n "$hits" ]; then
  echo "FAIL: model_type compared outside the family registry:"
  echo "$hits"
  exit 1
fi
echo "ok: model_type is compared only in src/models/family.cpp and src/models/families/"
