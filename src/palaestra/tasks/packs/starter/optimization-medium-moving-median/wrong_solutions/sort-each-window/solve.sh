#!/usr/bin/env bash
# fixes the quadratic list building but still sorts every window
set -e
sed -i 's/            values = values + \[int(line)\]/            values.append(int(line))/' smooth.py
grep -q 'values.append' smooth.py
