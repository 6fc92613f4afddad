#!/usr/bin/env bash
# Moved to tools/gpu_lease.sh (tools that are not benchmarks live there); this path still works.
exec bash "$(dirname "$0")/../tools/gpu_lease.sh" "$@"
