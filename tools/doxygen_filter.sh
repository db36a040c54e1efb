#!/usr/bin/env sh
# SPDX-License-Identifier: MIT
# Doxygen's INPUT_FILTER for engine/ headers (docs/Doxyfile): Doxygen 1.9 keeps a
# comment's leading " * " inside @verbatim ... @endverbatim, so every diagram
# would show a column of stars. This drops that prefix between the two markers
# and leaves every other line, and the line count, as it is.
exec sed -e '/@verbatim/,/@endverbatim/ s/^\([[:space:]]*\)\*\( \|$\)/\1/' "$1"
