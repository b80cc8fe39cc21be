#!/usr/bin/env bash
# files every name that matches the pattern, without checking that the date exists
set -e
mkdir -p archive/unsorted
for path in incoming/*; do
  name=$(basename "$path")
  if [[ $name =~ ^([a-z0-9]+(-[a-z0-9]+)*)-([0-9]{2})-([0-9]{2})-([0-9]{4})\.log$ ]]; then
    s=${BASH_REMATCH[1]} d=${BASH_REMATCH[3]} m=${BASH_REMATCH[4]} y=${BASH_REMATCH[5]}
    mkdir -p "archive/$s/$y/$m" && mv "$path" "archive/$s/$y/$m/$s-$y-$m-$d.log"
  else
    mv "$path" archive/unsorted/
  fi
done
