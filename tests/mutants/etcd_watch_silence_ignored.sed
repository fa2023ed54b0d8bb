# a watch stream that says nothing is kept for good (dropped without a word: never noticed)
s/^\t\t\th->deadline = now + WATCH_QUIET_MS; \/\* a stream from now on \*\/$/\t\t\th->deadline = 0;/
