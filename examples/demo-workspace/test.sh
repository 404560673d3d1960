#!/bin/sh
# The tests of slugify.sh: the quick cases first (stop at the first failing run), then the
# slow end-to-end check over the titles in titles.txt. Run with `sh test.sh`.
cd "$(dirname "$0")" || exit 2
. ./slugify.sh

failed=0
check() {
    got=$(slugify "$1")
    if [ "$got" = "$2" ]; then
        echo "ok   - '$1' -> '$got'"
    else
        echo "FAIL - '$1': expected '$2', got '$got'"
        failed=$((failed + 1))
    fi
}

check 'Hello World' 'hello-world'
check '  Trim me  ' 'trim-me'
check 'Rust & Shell: a tale' 'rust-shell-a-tale'
check 'already-a-slug' 'already-a-slug'
if [ "$failed" -ne 0 ]; then
    echo "$failed of 4 quick cases failed"
    exit 1
fi

echo "4 quick cases passed; end-to-end check (slow)..."
n=0
while IFS= read -r title; do
    sleep 1
    slug=$(slugify "$title")
    case "$slug" in
        *--* | -* | *- | '') echo "FAIL - end-to-end: '$title' -> '$slug'"; exit 1 ;;
    esac
    [ "$(slugify "$slug")" = "$slug" ] || { echo "FAIL - end-to-end: '$slug' is not stable"; exit 1; }
    n=$((n + 1))
    echo "ok   - end-to-end $n: '$title' -> '$slug'"
done < titles.txt
echo "all tests passed"
