# a polling core wakes an engine that asked for KVX_ENG_RINGS_WAKE_ENDS for a state on the way too
s/if (!q->wake_ends || kvx_eng_state_wakes(m.ev.state))$/if (true)/
