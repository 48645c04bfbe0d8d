#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Every setting in src/params.def is documented: it has a row in README.md's table of settings
# (under "## Settings") and docs/OPERATIONS.md names it. With HARP_PARAMS, that table must also
# be exactly what `harp-params --markdown` prints, so a changed default, range or doc string in
# params.def shows up here until the table is regenerated.
#
#   docs_params.sh [ROOT [HARP_PARAMS]]
#     ROOT         the source tree holding src/params.def, README.md and docs/OPERATIONS.md
#                  (default: two levels above this script)
#     HARP_PARAMS  the built harp-params (default $BUILD_DIR/harp-params when that exists)
#
# Exits 0 when all holds, 1 naming each setting missing and where, 2 on a bad tree.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=${1:-$here/../..}
harp_params=${2:-}
if [[ -z $harp_params && -n ${BUILD_DIR:-} && -x $BUILD_DIR/harp-params ]]; then
	harp_params=$BUILD_DIR/harp-params
fi
def=$root/src/params.def readme=$root/README.md ops=$root/docs/OPERATIONS.md
for f in "$def" "$readme" "$ops"; do
	[[ -r $f ]] || {
		echo "docs_params: cannot read $f" >&2
		exit 2
	}
done

# The environment name is the first quoted string of each HARP_PARAM_<TYPE>(field, "ENV", ...).
mapfile -t names < <(sed -n 's/^HARP_PARAM_[A-Z]*([a-z0-9_]*, *"\(HARP_[A-Z0-9_]*\)".*/\1/p' "$def")
rows=$(grep -c '^HARP_PARAM_' "$def" || true)
if ((${#names[@]} == 0 || ${#names[@]} != rows)); then
	echo "docs_params: read ${#names[@]} names from $rows HARP_PARAM rows of $def;" \
		"has the row format changed?" >&2
	exit 2
fi

# README's table: the run of '|' lines that starts at its header row, after "## Settings".
table=$(awk '
	/^## / { in_settings = ($0 == "## Settings"); if (in_table) exit }
	in_settings && /^\| Variable \| Default \|/ { in_table = 1 }
	in_table && !/^\|/ { exit }
	in_table { print }' "$readme")
if [[ -z $table ]]; then
	echo "docs_params: README.md has no settings table (a '| Variable | Default |' header" \
		"under '## Settings')" >&2
	exit 2
fi
mapfile -t listed < <(sed -n 's/^| `\(HARP_[A-Z0-9_]*\)` |.*/\1/p' <<<"$table")

fail=0
for name in "${names[@]}"; do
	# a here-string, not a pipe: grep -q ends at the first match, and with pipefail the
	# writer's SIGPIPE made a listed name read as missing (a CI run under load)
	if ! grep -qx -- "$name" <<<"$(printf '%s\n' "${listed[@]}")"; then
		echo "docs_params: README.md's settings table has no row for $name (src/params.def)"
		fail=1
	fi
	if ! grep -qw -- "$name" "$ops"; then
		echo "docs_params: docs/OPERATIONS.md never names $name (src/params.def): say there" \
			"what it does and when to set it"
		fail=1
	fi
done
for name in "${listed[@]}"; do
	if ! grep -qx -- "$name" <<<"$(printf '%s\n' "${names[@]}")"; then
		echo "docs_params: README.md's settings table has a row for $name, which" \
			"src/params.def does not define"
		fail=1
	fi
done

if [[ -n $harp_params ]]; then
	want=$("$harp_params" --markdown) || {
		echo "docs_params: $harp_params --markdown failed" >&2
		exit 2
	}
	if [[ $table != "$want" ]]; then
		echo "docs_params: README.md's settings table is not what harp-params --markdown prints" \
			"(- README.md, + harp-params):"
		diff -u --label README.md --label 'harp-params --markdown' <(echo "$table") \
			<(echo "$want") | tail -n +3 || true
		echo "docs_params: regenerate it: build/harp-params --markdown, in place of the table" \
			"under README.md's '## Settings'"
		fail=1
	fi
else
	echo "docs_params: no harp-params given or built: README's table checked by name only"
fi

if ((fail == 0)); then
	echo "docs_params: ${#names[@]} settings, each in README.md's table and docs/OPERATIONS.md"
fi
exit "$fail"
