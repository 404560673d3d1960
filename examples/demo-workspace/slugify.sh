#!/bin/sh
# slugify TEXT — prints TEXT as a URL slug: lower case, every run of characters other
# than a-z and 0-9 turned into one dash, no dash at either end.
slugify() {
    printf '%s\n' "$1" |
        tr '[:upper:]' '[:lower:]' |
        sed -e 's/[^a-z0-9]/-/g' -e 's/^-*//' -e 's/-*$//'
}
