# an event put while the room had no core ring does not send the room's later events the same way
/^tell_core(/,/^}/{
/^\t\tr->evq_spilled = true;$/d
}
