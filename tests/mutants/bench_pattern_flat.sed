# the pattern is the seed in every word: a page written one word off passes
s/^#define PATTERN_STEP .*/#define PATTERN_STEP 0ull/
