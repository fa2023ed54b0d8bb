# the oldest connection is closed whatever it did (a flood after a healthy HELLO evicts it)
s/if (prog < best_p) {/if (!best) {/
