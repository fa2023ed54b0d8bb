# session ids only grow: past INT_MAX a signed overflow, then negative ids, which mean "no engine" (the session's events dropped)
s/d->next_engine_id >= INT_MAX - 1 ? 1 : d->next_engine_id + 1;/d->next_engine_id + 1;/
