#!/bin/sh
# Stands in for a ptxas that rejects its input.
echo "ptxas fatal : pretend failure" >&2
exit 1
