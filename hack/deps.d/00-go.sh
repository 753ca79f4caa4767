#!/usr/bin/env bash
# Go modules for the build and tests.
set -euo pipefail
go mod download
